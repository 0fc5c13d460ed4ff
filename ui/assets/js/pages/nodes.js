// nodes.js: the nodes page with YARN's ResourceManager columns, the
// opportunistic ones included — running (G)/(O), memory (G)/(O), vcores
// (G)/(O), queued — capacity bars, and drain.

import { asList, request, watch } from "../api.js";
import { h, link, replace } from "../dom.js";
import { ask } from "../confirm.js";
import { ago, idOrder, mem, nsToDate, num, stamp } from "../format.js";
import { badge, empty, errorNote, pageHead, table, usageBar } from "../widgets.js";

export function render(main, ctx) {
  let nodes = null, err = null, note = null;
  const sort = { sort: "id", desc: false };
  const root = h("div.page#nodes");
  main.append(root);
  const draw = () => {
    const list = nodes || [];
    const ready = list.filter((n) => n.status === "READY").length;
    replace(root, pageHead("Nodes", nodes ? `${list.length} node${list.length === 1 ? "" : "s"} · ${ready} ready` : ""),
      err ? errorNote(err) : null, note,
      nodes === null ? h("p.loading", "Loading…") : list.length === 0 ? empty("No nodes have registered. Start an agent with weft agent -join …") :
        table(nodeColumns(drainControl, list), list, sort, { cls: "nodes", onSort: (k, d) => { sort.sort = k; sort.desc = d; draw(); }, rowData: (n) => ({ node: n.id }) }),
      h("p.panel-sub", "G: guaranteed, O: opportunistic. Memory and vcores are allocated / capacity; bars show guaranteed then opportunistic use."));
  };
  const drainControl = (n) => drainButton(n, ctx.signal, (result) => { note = result; draw(); });
  watch("/v1/nodes", ctx.signal, (data) => { nodes = asList(data, "nodes").sort((a, b) => idOrder(a.id, b.id)); err = null; draw(); }, (e) => { err = e; draw(); });
  ctx.every(10000, () => { if (nodes && nodes.some((n) => n.drain_deadline)) draw(); });
  draw();
}

/** DEADLINES are the drain deadlines offered: the API's duration, and how it reads. */
const DEADLINES = [["5m", "5 minutes"], ["15m", "15 minutes"], ["1h", "1 hour"], ["4h", "4 hours"], ["24h", "24 hours"]];

/** drainPath is the API route that drains node id or ends its drain. */
const drainPath = (id) => `/v1/node/${encodeURIComponent(id)}/drain`;

/**
 * drainButton is a node's drain control: on a READY node, "Drain…" asks
 * for a deadline and drains ({"deadline": "1h"}); on a DRAINING node,
 * "Stop draining" makes it READY again ({"disable": true}). done gets a
 * note saying what happened, or the API's error.
 */
export function drainButton(n, signal, done) {
  const send = async (body, ok) => {
    try {
      await request("POST", drainPath(nodeRef(n)), { body });
      done(h("div.note.note-ok", ok));
    } catch (e) {
      done(errorNote(e));
    }
  };
  if (n.status === "DRAINING") {
    return h("button.ghost.small", { type: "button", dataset: { undrain: n.id },
      onclick: () => send({ disable: true }, `${n.id} is READY again and takes new containers.`) }, "Stop draining");
  }
  if (n.status !== "READY") return h("span.muted", "–");
  return h("button.warn.small", { type: "button", dataset: { drain: n.id }, onclick: async () => {
    const sel = h("select", { name: "deadline" }, DEADLINES.map(([d, text]) => h("option", { value: d, selected: d === "1h" }, `${text} from now`)));
    const answer = await ask({
      title: `Drain ${n.id}?`,
      body: `${n.id} will take no new containers. Those running on it may finish until the deadline; any still running then are killed (reason “drained”) and their apps place them elsewhere. You can stop draining at any time before.`,
      fields: h("label.field", "Deadline ", sel),
      ok: "Drain",
      tone: "warn",
      signal,
    });
    const text = DEADLINES.find(([d]) => d === answer?.deadline)?.[1];
    if (answer) send({ deadline: answer.deadline }, `${n.id} is draining: it takes no new containers, and whatever still runs on it in ${text} is killed.`);
  } }, "Drain…");
}

/** nodeState is a node's state badge; a DRAINING node's deadline, or the
 * app a capacity queue holds it for, under it. */
export function nodeState(n) {
  if (n.reservation) {
    const r = n.reservation;
    return h("div", badge(n.status, n.status_reason),
      h("div.sub-line.reserved", { title: `Held for a container of ${r.app_id} that does not fit yet: no other app's container is placed here until it does`, dataset: { reservedFor: r.app_id } },
        "reserved for ", h("span.mono", r.app_id)));
  }
  if (n.status !== "DRAINING" || !n.drain_deadline) return badge(n.status, n.status_reason);
  const at = nsToDate(n.drain_deadline);
  return h("div", badge(n.status, n.status_reason),
    h("div.sub-line.deadline", { title: `Containers still running at ${stamp(at)} are killed`, dataset: { deadline: String(at.getTime()) } },
      "deadline ", h("span", ago(at))));
}

/** nodeRef names a node to the API: SUBCLUSTER.NODE through a federation's
 * router (node IDs are unique only within a sub-cluster), else its ID. */
export const nodeRef = (n) => (n.subcluster ? `${n.subcluster}.${n.id}` : n.id);

/** nodeColumns are the nodes table's columns; action renders the last one.
 * Through a federation's router each node names its sub-cluster: shown
 * when any of nodes has one, and the node's page is SUBCLUSTER.NODE. */
export function nodeColumns(action, nodes = []) {
  const r = (n, k, part) => n[part]?.[k] || 0;
  const cols = [
    { key: "id", label: "Node", cls: "mono", render: (n) => h("div", link(`/ui/nodes/${encodeURIComponent(nodeRef(n))}`, n.id), h("div.sub-line", n.address)) },
    { key: "rack", label: "Rack", cls: "mono" },
    { key: "status", label: "State", render: nodeState },
    { key: "running_guaranteed", label: "Running (G)", num: true },
    { key: "running_opportunistic", label: "Running (O)", num: true },
    { key: "queued", label: "Queued", num: true },
    { key: "mem_g", label: "Memory (G)", num: true, sort: (n) => r(n, "memory_mb", "allocated_guaranteed"), render: (n) => mem(r(n, "memory_mb", "allocated_guaranteed")) },
    { key: "mem_o", label: "Memory (O)", num: true, sort: (n) => r(n, "memory_mb", "allocated_opportunistic"), render: (n) => mem(r(n, "memory_mb", "allocated_opportunistic")) },
    { key: "mem_avail", label: "Memory avail", num: true, sort: (n) => r(n, "memory_mb", "capacity") - r(n, "memory_mb", "allocated_guaranteed"),
      render: (n) => mem(Math.max(0, r(n, "memory_mb", "capacity") - r(n, "memory_mb", "allocated_guaranteed") - r(n, "memory_mb", "allocated_opportunistic"))) },
    { key: "cpu_g", label: "vcores (G)", num: true, sort: (n) => r(n, "vcores", "allocated_guaranteed"), render: (n) => num(r(n, "vcores", "allocated_guaranteed")) },
    { key: "cpu_o", label: "vcores (O)", num: true, sort: (n) => r(n, "vcores", "allocated_opportunistic"), render: (n) => num(r(n, "vcores", "allocated_opportunistic")) },
    { key: "cpu_avail", label: "vcores avail", num: true, sort: (n) => r(n, "vcores", "capacity") - r(n, "vcores", "allocated_guaranteed"),
      render: (n) => num(Math.max(0, r(n, "vcores", "capacity") - r(n, "vcores", "allocated_guaranteed") - r(n, "vcores", "allocated_opportunistic"))) },
    { key: "capacity", label: "Memory use", cls: "cap-col", sort: (n) => (r(n, "memory_mb", "allocated_guaranteed") + r(n, "memory_mb", "allocated_opportunistic")) / (r(n, "memory_mb", "capacity") || 1),
      render: (n) => usageBar(r(n, "memory_mb", "capacity"), r(n, "memory_mb", "allocated_guaranteed"), r(n, "memory_mb", "allocated_opportunistic"), mem) },
  ];
  if (nodes.some((n) => n.subcluster)) cols.splice(1, 0, { key: "subcluster", label: "Sub-cluster", cls: "mono" });
  if (action) cols.push({ key: "", label: "Drain", render: action });
  return cols;
}
