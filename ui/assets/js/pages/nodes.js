// nodes.js: the nodes page with YARN's ResourceManager columns, the
// opportunistic ones included — running (G)/(O), memory (G)/(O), vcores
// (G)/(O), queued — capacity bars, and drain.

import { asList, request, watch } from "../api.js";
import { h, link, replace } from "../dom.js";
import { ago, idOrder, mem, num } from "../format.js";
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
        table(nodeColumns(drainControl), list, sort, { cls: "nodes", onSort: (k, d) => { sort.sort = k; sort.desc = d; draw(); }, rowData: (n) => ({ node: n.id }) }),
      h("p.panel-sub", "G: guaranteed, O: opportunistic. Memory and vcores are allocated / capacity; bars show guaranteed then opportunistic use."));
  };
  const drainControl = (n) => drainButton(n, async (body) => {
    try {
      await request("POST", `/v1/node/${encodeURIComponent(n.id)}/drain`, { body });
      note = h("div.note.note-ok", body.disable ? `${n.id} is taking containers again.` : `${n.id} is draining: it takes no new containers; running ones stop by the deadline (${body.deadline}).`);
    } catch (e) {
      note = errorNote(e);
    }
    draw();
  });
  watch("/v1/nodes", ctx.signal, (data) => { nodes = asList(data, "nodes").sort((a, b) => idOrder(a.id, b.id)); err = null; draw(); }, (e) => { err = e; draw(); });
  ctx.every(10000, () => { if (nodes && nodes.some((n) => n.drain_deadline)) draw(); });
  draw();
}

const DEADLINES = ["5m", "15m", "1h", "4h", "24h"];

/** drainButton is a node's drain control: pick a deadline, then drain; or undo. */
export function drainButton(n, send) {
  if (n.status === "DRAINING") {
    return h("div.drain",
      n.drain_deadline ? h("span.small.muted", `deadline ${ago(new Date(n.drain_deadline))}`) : null,
      h("button.ghost.small", { type: "button", onclick: () => send({ deadline: "0s", disable: true }) }, "Stop draining"));
  }
  if (n.status !== "READY") return h("span.muted", "–");
  const sel = h("select.small", { "aria-label": `Drain deadline for ${n.id}` }, DEADLINES.map((d) => h("option", { value: d, selected: d === "1h" }, d)));
  return h("div.drain", sel, h("button.warn.small", { type: "button", dataset: { drain: n.id }, onclick: () => send({ deadline: sel.value, disable: false }) }, "Drain"));
}

/** nodeColumns are the nodes table's columns; action renders the last one. */
export function nodeColumns(action) {
  const r = (n, k, part) => n[part]?.[k] || 0;
  const cols = [
    { key: "id", label: "Node", cls: "mono", render: (n) => h("div", link(`/ui/nodes/${encodeURIComponent(n.id)}`, n.id), h("div.sub-line", n.address)) },
    { key: "rack", label: "Rack", cls: "mono" },
    { key: "status", label: "State", render: (n) => badge(n.status, n.status_reason) },
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
  if (action) cols.push({ key: "", label: "Drain", render: action });
  return cols;
}
