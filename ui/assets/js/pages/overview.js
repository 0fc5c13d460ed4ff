// overview.js: the cluster at a glance — leader and servers, capacity and
// use (guaranteed and opportunistic), apps by state, utilisation over time.

import { asList, watch } from "../api.js";
import { legend, sampleOf, Samples, utilisationChart, windowOf } from "../chart.js";
import { h, link, replace } from "../dom.js";
import { ago, duration, idOrder, mem, nsToDate, num, pct } from "../format.js";
import { badge, card, empty, errorNote, pageHead, panel, table, usageBar } from "../widgets.js";

const samples = new Samples();
const APP_STATES = ["SUBMITTED", "ACCEPTED", "RUNNING", "FINISHED", "FAILED", "KILLED"];

export function render(main, ctx) {
  let status = null, apps = null, err = null;
  const root = h("div.page#overview");
  main.append(root);

  const draw = () => {
    if (!status) {
      replace(root, pageHead("Overview"), err ? errorNote(err) : h("p.loading", "Loading…"));
      return;
    }
    const n = (status.servers || []).length;
    const subs = status.subclusters || [];
    const who = federated(status) ? `${subs.length} sub-cluster${subs.length === 1 ? "" : "s"} (${subs.join(", ")}) · ${n} router${n === 1 ? "" : "s"}` :
      `${n} server${n === 1 ? "" : "s"}`;
    const unreachable = (status.unreachable || []).length ? h("p.note", `Not counted, unreachable: ${status.unreachable.join(", ")}`) : null;
    replace(root, pageHead("Overview", `${who} · Raft term ${status.raft?.term ?? "–"} · ${status.leader ? `led by ${leaderOf(status)}` : "no leader"}`), err ? errorNote(err) : null, unreachable,
      cards(status), h("div.grid-2.even", chartPanel(), appsPanel(status, apps)), serversPanel(status));
  };
  watch("/v1/status", ctx.signal, (st) => {
    status = st;
    err = null;
    samples.add(sampleOf(st));
    draw();
  }, (e) => { err = e; draw(); });
  watch("/v1/apps", ctx.signal, (data) => { apps = asList(data, "apps"); draw(); }, () => {});
  // Blocking queries answer only on change: sample the last state on a clock too.
  ctx.every(5000, () => {
    if (status) {
      samples.add(sampleOf(status));
      draw();
    }
  });
  draw();
}

/** leaderOf names the leader by its server ID when the status lists it. */
export function leaderOf(st) {
  const s = (st.servers || []).find((s) => s.address === st.leader) || (st.servers || []).find((s) => s.state === "leader");
  return s ? s.id : st.leader;
}

function cards(st) {
  const cap = st.capacity || {}, g = st.used_guaranteed || {}, o = st.used_opportunistic || {};
  const nodes = st.nodes || {};
  const servers = st.servers || [];
  return h("div.cards",
    card("Leader", h("span.mono", leaderOf(st) || "none"), st.leader ? h("span.mono", st.leader) : "no leader: writes wait", { dataset: { stat: "leader" } }),
    card("Nodes", h("span", h("span.num", num(nodes.ready)), h("span.unit", " ready")),
      nodes.down ? h("span.text-bad", `${nodes.down} down`) : "none down", { dataset: { stat: "nodes" } }),
    card("Memory", h("span.num", `${pct((g.memory_mb || 0) + (o.memory_mb || 0), cap.memory_mb)}%`),
      usageBar(cap.memory_mb || 0, g.memory_mb || 0, o.memory_mb || 0, mem), { dataset: { stat: "memory" } }),
    card("vcores", h("span.num", `${pct((g.vcores || 0) + (o.vcores || 0), cap.vcores)}%`),
      usageBar(cap.vcores || 0, g.vcores || 0, o.vcores || 0, (v) => `${v}`), { dataset: { stat: "vcores" } }),
    card("Containers", h("span", h("span.num", num((st.running_guaranteed || 0) + (st.running_opportunistic || 0))), h("span.unit", " running")),
      h("span", h("span.key.g", `${st.running_guaranteed || 0} G`), " · ", h("span.key.o", `${st.running_opportunistic || 0} O`), ` · ${st.queued || 0} queued`),
      { dataset: { stat: "containers" } }),
  );
}

function chartPanel() {
  return panel("Utilisation", h("p.panel-sub", `Share of cluster capacity in use, sampled by this page (kept for this tab): the last ${duration(windowOf(samples.list))}.`),
    utilisationChart(samples.list), legend());
}

function appsPanel(st, apps) {
  const counts = st.apps || {};
  const states = [...new Set([...APP_STATES, ...Object.keys(counts)])].filter((s) => counts[s]);
  const total = states.reduce((n, s) => n + counts[s], 0);
  const recent = (apps || []).slice().sort((a, b) => (b.submitted_at || 0) - (a.submitted_at || 0) || idOrder(b.id, a.id)).slice(0, 6);
  return panel("Apps",
    total === 0 ? empty("No apps yet. Submit one with weft app submit.") : [
      h("div.statebar", states.map((s) => h(`span.seg.state-${s}`, { style: { flexGrow: counts[s] }, title: `${s}: ${counts[s]}` }))),
      h("ul.state-counts", states.map((s) => h("li", link(`/ui/apps?state=${s}`, badge(s), h("span.num", num(counts[s])))))),
      recent.length ? table([
        { key: "id", label: "Recent", render: (a) => link(`/ui/apps/${encodeURIComponent(a.id)}`, a.id) },
        { key: "name", label: "Name", cls: "ellipsis" },
        { key: "state", label: "State", render: (a) => badge(a.state) },
        { key: "submitted_at", label: "Submitted", num: true, render: (a) => ago(nsToDate(a.submitted_at)) },
      ], recent, {}, { cls: "compact" }) : null,
    ]);
}

/** federated reports whether a federation's router answered: its status
 * totals sub-clusters, and its servers and Raft are the routers'. */
const federated = (st) => (st.subclusters || []).length > 0;

function serversPanel(st) {
  const servers = (st.servers || []).slice().sort((a, b) => idOrder(a.id, b.id));
  const what = federated(st) ? "router" : "server";
  return panel(federated(st) ? "Routers" : "Servers", servers.length === 0 ? empty(`No ${what}s reported.`) : table([
    { key: "id", label: "ID", cls: "mono" },
    { key: "address", label: "Address", cls: "mono" },
    { key: "state", label: "Raft state", render: (s) => badge(s.state || (s.id === st.leader ? "leader" : "follower")) },
    { key: "voter", label: "Voter", render: (s) => (s.voter ? "yes" : "no") },
  ], servers, {}, { cls: "compact", rowData: (s) => ({ server: s.id }) }),
  st.raft ? h("p.panel-sub", `This ${what}: ${st.raft.id} (${st.raft.state}), commit index ${num(st.raft.commit_index)}, applied ${num(st.raft.applied_index)}.`) : null);
}
