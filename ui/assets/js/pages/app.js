// app.js: one app — its state and why it waits, a timeline of its
// containers and events, its AM's counters, AM attempts, containers,
// preemptions and logs.

import { asList, asObject, request, watch } from "../api.js";
import { h, link, replace, s } from "../dom.js";
import { ago, duration, idOrder, isZero, niceStep, nsToDate, res, stamp, tickLabel } from "../format.js";
import { ask } from "../confirm.js";
import { logViewer } from "../logview.js";
import { badge, containerBadge, empty, errorNote, pageHead, panel, table } from "../widgets.js";
import { containerHref } from "./containers.js";

const ENDED = new Set(["FINISHED", "FAILED", "KILLED"]);

export function render(main, ctx) {
  const id = ctx.params[0];
  let app = null, containers = null, err = null, logsFor = null, logsEl = null;
  const root = h("div.page#app");
  main.append(root);
  const logSignal = () => {
    const ac = new AbortController();
    ctx.signal.addEventListener("abort", () => ac.abort(), { once: true });
    return ac;
  };
  let logAC = null;

  const pickLogs = (cid) => {
    if (logAC) logAC.abort();
    logAC = logSignal();
    logsFor = cid;
    logsEl = cid ? logViewer(cid, logAC.signal, { height: "320px" }) : null;
    draw();
  };

  const draw = () => {
    if (!app) {
      replace(root, pageHead(`App ${id}`), err ? errorNote(err) : h("p.loading", "Loading…"));
      return;
    }
    const cs = containers || [];
    if (!logsFor && cs.length) {
      const first = cs.find((c) => !c.is_am && c.started_at) || cs.find((c) => c.started_at) || cs[0];
      pickLogs(first.id);
      return;
    }
    const kill = ENDED.has(app.state) ? null : h("button.danger", { type: "button", dataset: { kill: app.id }, onclick: async () => {
      const running = cs.filter((c) => c.state === "RUNNING").length;
      const yes = await ask({
        title: `Kill ${app.id}${app.name ? ` (${app.name})` : ""}?`,
        body: `Its ${running} running container${running === 1 ? "" : "s"} stop at once and it ends KILLED. This cannot be undone.`,
        ok: "Kill app",
        tone: "danger",
        signal: ctx.signal,
      });
      if (!yes) return;
      try { await request("DELETE", `/v1/app/${encodeURIComponent(app.id)}`); } catch (e) { err = e; draw(); }
    } }, "Kill app");
    const pre = logsEl && logsEl.querySelector("pre");
    const scroll = pre ? pre.scrollTop : 0;
    replace(root,
      pageHead(h("span", app.name || app.id, " ", badge(app.state, app.diagnostics)), h("span.mono", app.id), kill),
      err ? errorNote(err) : null,
      facts(app, cs),
      app.why_pending ? h("div.note.note-wait#why-pending", h("strong", "Why pending: "), app.why_pending.message, h("span.code", app.why_pending.code)) : null,
      app.diagnostics && !app.why_pending ? h("div.note", { class: `note ${app.state === "FAILED" ? "note-bad" : ""}` }, h("strong", "Diagnostics: "), app.diagnostics) : null,
      app.spans && app.spans.length ? panel(`Sub-clusters (${app.spans.length})`, spansTable(app)) : null,
      panel("Timeline", timeline(app, cs)),
      isJob(app) ? panel("MapReduce job", jobFacts(app.counters)) : null,
      hasCounters(app) ? panel(`Counters (${Object.keys(app.counters).length})`, countersTable(app)) : null,
      h("div.grid-2",
        panel(`AM attempts (${(app.attempts || []).length})`, attemptsTable(app)),
        panel(`Preemptions (${(app.preemptions || []).length})`, preemptionsTable(app))),
      panel(`Containers (${cs.length})`, containersTable(cs, pickLogs, logsFor)),
      panel("Logs",
        cs.length ? h("div.log-pick", h("label", "Container ", h("select", { onchange: (e) => pickLogs(e.target.value) },
          cs.map((c) => h("option", { value: c.id, selected: c.id === logsFor }, `${c.id}${c.is_am ? " (AM)" : ""} · ${c.state}`))))) : null,
        logsEl || empty("No containers yet, so no logs.")));
    if (pre) pre.scrollTop = scroll;
  };

  watch(`/v1/app/${encodeURIComponent(id)}`, ctx.signal, (data) => { app = asObject(data, "app"); err = null; draw(); }, (e) => { err = e; draw(); });
  watch(`/v1/app/${encodeURIComponent(id)}/containers`, ctx.signal, (data) => {
    containers = asList(data, "containers").sort((a, b) => idOrder(a.id, b.id));
    draw();
  }, () => {});
  ctx.every(5000, () => { if (app && !ENDED.has(app.state)) draw(); });
  draw();
}

function facts(app, cs) {
  const sub = nsToDate(app.submitted_at), fin = nsToDate(app.finished_at);
  const end = fin ? fin.getTime() : Date.now();
  const c = app.containers || {};
  const item = (k, v, attrs = {}) => h("div.fact", attrs, h("dt", k), h("dd", v));
  return h("dl.facts",
    item("State", badge(app.state), { dataset: { fact: "state" } }),
    item("Queue", link(`/ui/apps?queue=${encodeURIComponent(app.queue)}`, app.queue)),
    app.home ? item("Home", h("span.mono", app.home), { dataset: { fact: "home" } }) : null,
    app.unmanaged_for ? item("AM in", h("span.mono", app.unmanaged_for), { dataset: { fact: "unmanaged-for" } }) : null,
    item("User", app.user || "–"),
    item("Priority", String(app.priority ?? 0)),
    item("Submitted", h("span", { title: stamp(sub) }, ago(sub))),
    item(fin ? "Ran for" : "Running for", duration(end - (sub ? sub.getTime() : end))),
    item("Containers", h("span.num", { dataset: { count: String(cs.length) } },
      `${c.running || 0} running · ${c.completed || 0} done${c.allocated ? ` · ${c.allocated} allocated` : ""}${c.queued ? ` · ${c.queued} queued` : ""}`),
      { dataset: { fact: "containers" } }),
    item("Pending", isZero(app.pending) ? "nothing" : res(app.pending)),
    item("AM attempts", String(app.am_attempts ?? 0)),
    blacklisted(app, item));
}

/** blacklisted shows the nodes the app's AM blacklisted, and whether the
 * list is in force (one naming a third of the READY nodes is ignored). */
function blacklisted(app, item) {
  const nodes = app.blacklist || [];
  if (!nodes.length) return null;
  const links = nodes.flatMap((n, i) => [i ? ", " : null, link(`/ui/nodes/${encodeURIComponent(n)}`, n)]);
  const why = app.blacklist_ignored
    ? h("span.muted", " (ignored: 33% or more of the READY nodes)")
    : h("span.muted", ` (after ${app.max_failures_per_node} failures on each)`);
  return item("Blacklisted nodes", h("span.mono", ...links, why), { dataset: { fact: "blacklist" } });
}

const W = 1000, ROW = 16, PADL = 150, PADR = 10;

/** timeline draws each container as a bar over the app's life, with its events. */
function timeline(app, cs) {
  const t0 = app.submitted_at || Math.min(...cs.map((c) => c.allocated_at || Infinity));
  if (!t0) return empty("No events yet.");
  const now = Date.now() * 1e6;
  const t1 = Math.max(app.finished_at || now, ...cs.map((c) => c.finished_at || 0), t0 + 1e9);
  const x = (t) => PADL + ((W - PADL - PADR) * (t - t0)) / (t1 - t0);
  const rows = cs.slice(0, 40);
  const hgt = 30 + rows.length * (ROW + 4) + 22;
  const svg = s("svg", { viewBox: `0 0 ${W} ${hgt}`, class: "timeline", role: "img", "aria-label": "App timeline" });
  // the app's own bar
  svg.append(s("text", { x: 0, y: 19, class: "tl-label" }, "app"));
  svg.append(s("rect", { x: x(t0), y: 8, width: Math.max(2, x(app.finished_at || now) - x(t0)), height: ROW, rx: 3, class: `tl-app state-${app.state}` }));
  rows.forEach((c, i) => {
    const y = 30 + i * (ROW + 4);
    const a = c.allocated_at || t0, st = c.started_at || 0, f = c.finished_at || (ENDED.has(app.state) ? t1 : now);
    svg.append(s("text", { x: 0, y: y + 12, class: "tl-label" }, `${c.id}${c.is_am ? " (AM)" : ""}`));
    svg.append(s("rect", { x: x(a), y: y + 3, width: Math.max(1, x(st || f) - x(a)), height: ROW - 6, rx: 2, class: "tl-wait" },
      s("title", {}, `${c.id}: allocated ${duration((a - t0) / 1e6)} after submit`)));
    if (st) {
      svg.append(s("rect", { x: x(st), y, width: Math.max(2, x(f) - x(st)), height: ROW, rx: 3, class: `tl-run ${c.execution_type === "OPPORTUNISTIC" ? "o" : "g"} state-${c.state} ${c.is_am ? "am" : ""}` },
        s("title", {}, `${c.id} (${c.execution_type}) ran ${duration((f - st) / 1e6)}: ${c.state}${c.reason ? `, ${c.reason}` : ""}`)));
    }
  });
  for (const p of app.preemptions || []) {
    if (!p.at) continue;
    svg.append(s("line", { x1: x(p.at), x2: x(p.at), y1: 4, y2: hgt - 20, class: "tl-preempt" }, s("title", {}, `preempted ${p.container_id} for ${p.for_app}: ${p.reason}`)));
  }
  // time axis: "submitted", then round steps (+10 s, +20 s, …)
  const span = (t1 - t0) / 1e6;
  svg.append(s("text", { x: x(t0), y: hgt - 4, class: "axis", "text-anchor": "start" }, "submitted"));
  const step = niceStep(span, 6);
  for (let ms = step; ms <= span; ms += step) {
    const at = x(t0 + ms * 1e6);
    if (at - PADL < 60) continue; // would overlap "submitted"
    svg.append(s("text", { x: at, y: hgt - 4, class: "axis", "text-anchor": W - PADR - at < 24 ? "end" : "middle" }, `+${tickLabel(ms)}`));
  }
  return h("div", svg, cs.length > rows.length ? h("p.panel-sub", `First ${rows.length} of ${cs.length} containers.`) : null, events(app, cs, t0));
}

function events(app, cs, t0) {
  const ev = [{ t: app.submitted_at, what: "submitted", cls: "wait" }];
  for (const c of cs.filter((c) => c.is_am)) {
    if (c.allocated_at) ev.push({ t: c.allocated_at, what: `AM attempt ${c.attempt || ""} allocated on ${c.node_id}`, cls: "wait" });
    if (c.started_at) ev.push({ t: c.started_at, what: `AM attempt ${c.attempt || ""} started`, cls: "run" });
    if (c.finished_at) ev.push({ t: c.finished_at, what: `AM attempt ${c.attempt || ""} ${c.state.toLowerCase()}${c.reason ? ` (${c.reason})` : ""}`, cls: c.exit_code ? "bad" : "ok" });
  }
  const tasks = cs.filter((c) => !c.is_am && c.started_at);
  if (tasks.length) ev.push({ t: Math.min(...tasks.map((c) => c.started_at)), what: `first task started (${tasks.length} ran)`, cls: "run" });
  for (const p of app.preemptions || []) ev.push({ t: p.at, what: `${p.container_id} preempted for ${p.for_app} (${p.reason})`, cls: "bad" });
  if (app.finished_at) ev.push({ t: app.finished_at, what: app.state.toLowerCase(), cls: app.state === "FINISHED" ? "ok" : "bad" });
  ev.sort((a, b) => a.t - b.t);
  return h("ol.events", ev.filter((e) => e.t).map((e) =>
    h("li", { class: `ev-${e.cls}` }, h("span.ev-t.num", `+${tickLabel((e.t - t0) / 1e6)}`), h("span", e.what))));
}

/** spansTable shows a spanning app's containers in each sub-cluster (through a router). */
function spansTable(app) {
  return table([
    { key: "subcluster", label: "Sub-cluster", cls: "mono", render: (p) => h("span", p.subcluster, p.home ? [" ", h("span.tag", "home")] : null) },
    { key: "state", label: "State", render: (p) => (p.unreachable ? h("span.muted", p.unreachable) : badge(p.state)) },
    { key: "running", label: "Running", num: true, render: (p) => String((p.containers || {}).running || 0) },
    { key: "completed", label: "Done", num: true, render: (p) => String((p.containers || {}).completed || 0) },
    { key: "allocated", label: "Allocated", num: true, render: (p) => String((p.containers || {}).allocated || 0) },
  ], app.spans, {}, { cls: "compact", rowData: (p) => ({ subcluster: p.subcluster }) });
}

function hasCounters(app) {
  return !!app.counters && Object.keys(app.counters).length > 0;
}

/** isJob says whether the app's counters are a MapReduce job's (SPEC §19). */
function isJob(app) {
  return hasCounters(app) && "maps.total" in app.counters;
}

/** jobFacts sums up a MapReduce job's counters: progress, where its maps
 * ran against their splits, and how far its shuffle went. */
function jobFacts(c) {
  const n = (name) => c[name] || 0;
  const num = (v) => v.toLocaleString("en-US");
  const shuffle = n("shuffle.bytes.node_local") + n("shuffle.bytes.rack_local") + n("shuffle.bytes.off_rack");
  const share = (v) => (shuffle ? ` (${Math.round((100 * v) / shuffle)}%)` : "");
  const item = (k, v, fact) => h("div.fact", { dataset: { fact } }, h("dt", k), h("dd", v));
  return h("dl.facts",
    item("Maps", `${num(n("maps.done"))} of ${num(n("maps.total"))} done`, "maps"),
    item("Reduces", `${num(n("reduces.done"))} of ${num(n("reduces.total"))} done`, "reduces"),
    item("Map locality", `${num(n("maps.data_local"))} data-local · ${num(n("maps.rack_local"))} rack-local · ${num(n("maps.off_rack"))} off-rack`, "map-locality"),
    n("maps.rerun_lost_output") ? item("Maps run again", `${num(n("maps.rerun_lost_output"))} (output lost)`, "maps-rerun") : null,
    item("Shuffle", `${num(shuffle)} bytes`, "shuffle"),
    item("By distance", `${num(n("shuffle.bytes.node_local"))} node${share(n("shuffle.bytes.node_local"))} · ${num(n("shuffle.bytes.rack_local"))} rack${share(n("shuffle.bytes.rack_local"))} · ${num(n("shuffle.bytes.off_rack"))} off-rack${share(n("shuffle.bytes.off_rack"))}`, "shuffle-distance"),
    item("TND / WTND", `${num(n("shuffle.tnd"))} / ${num(n("shuffle.wtnd"))}`, "wtnd"));
}

/** countersTable lists the figures the app's AM reported (SPEC §19), by name. */
function countersTable(app) {
  const rows = Object.entries(app.counters).map(([name, value]) => ({ name, value }))
    .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  return table([
    { key: "name", label: "Counter", cls: "mono" },
    { key: "value", label: "Value", num: true, render: (c) => c.value.toLocaleString("en-US") },
  ], rows, {}, { cls: "compact", rowData: (c) => ({ counter: c.name }) });
}

function attemptsTable(app) {
  const at = app.attempts || [];
  if (!at.length) return empty("No AM attempt yet.");
  return table([
    { key: "attempt", label: "#", num: true },
    { key: "container_id", label: "Container", cls: "mono", render: (a) => (a.container_id ? link(`/ui/containers/${encodeURIComponent(a.container_id)}?app=${encodeURIComponent(app.id)}`, a.container_id) : "–") },
    { key: "node_id", label: "Node", cls: "mono", render: (a) => (a.node_id ? link(`/ui/nodes/${encodeURIComponent(a.node_id)}`, a.node_id) : "–") },
    { key: "diagnostics", label: "Diagnostics", cls: "wrap", render: (a) => a.diagnostics || h("span.muted", "–") },
  ], at, {}, { cls: "compact" });
}

function preemptionsTable(app) {
  const ps = app.preemptions || [];
  if (!ps.length) return empty("None of this app's containers were preempted.");
  return table([
    { key: "container_id", label: "Container", cls: "mono" },
    { key: "node_id", label: "Node", cls: "mono" },
    { key: "reason", label: "Reason" },
    { key: "for_app", label: "For app", render: (p) => link(`/ui/apps/${encodeURIComponent(p.for_app)}`, p.for_app) },
    { key: "at", label: "When", num: true, render: (p) => ago(nsToDate(p.at)) },
  ], ps, {}, { cls: "compact" });
}

/** containersTable lists an app's containers with a logs button each. */
function containersTable(cs, pickLogs, logsFor) {
  if (!cs.length) return empty("No containers yet.");
  return table([
    { key: "id", label: "ID", cls: "mono", render: (c) => link(containerHref(c), c.id, c.is_am ? h("span.tag", "AM") : null) },
    { key: "execution_type", label: "Type", render: (c) => badge(c.execution_type) },
    { key: "node_id", label: "Node", cls: "mono", render: (c) => (c.node_id ? link(`/ui/nodes/${encodeURIComponent(c.node_id)}`, c.node_id) : "–") },
    { key: "state", label: "State", render: (c) => containerBadge(c) },
    { key: "exit_code", label: "Exit", num: true, render: (c) => (c.exit_code === null || c.exit_code === undefined ? "–" : String(c.exit_code)) },
    { key: "reason", label: "Reason", render: (c) => c.reason || h("span.muted", "–") },
    { key: "resources", label: "Resources", num: true, render: (c) => res(c.resources) },
    { key: "ran", label: "Ran", num: true, render: (c) => (c.started_at ? duration(((c.finished_at || Date.now() * 1e6) - c.started_at) / 1e6) : "–") },
    { key: "logs", label: "", render: (c) => h("button.ghost.small", { type: "button", class: `ghost small ${c.id === logsFor ? "on" : ""}`, onclick: () => pickLogs(c.id) }, "logs") },
  ], cs, {}, { rowData: (c) => ({ container: c.id }) });
}
