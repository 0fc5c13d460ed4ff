// node.js: one node — its capacity and use, and the containers on it.

import { asList, asObject, watch } from "../api.js";
import { h, link, replace } from "../dom.js";
import { idOrder, mem, num, res } from "../format.js";
import { card, empty, errorNote, pageHead, panel, table, usageBar } from "../widgets.js";
import { containerColumns } from "./containers.js";
import { drainButton, nodeState } from "./nodes.js";

export function render(main, ctx) {
  const id = ctx.params[0];
  let node = null, containers = [], err = null, note = null;
  const root = h("div.page#node");
  main.append(root);
  const draw = () => {
    if (!node) {
      replace(root, pageHead(`Node ${id}`), err ? errorNote(err) : h("p.loading", "Loading…"));
      return;
    }
    const cap = node.capacity || {}, g = node.allocated_guaranteed || {}, o = node.allocated_opportunistic || {};
    const running = containers.filter((c) => c.state !== "COMPLETED");
    replace(root,
      pageHead(h("span", node.id, " ", nodeState(node)), h("span.mono", `${node.address} · rack ${node.rack || "–"}`),
        drainButton(node, ctx.signal, (result) => { note = result; draw(); })),
      err ? errorNote(err) : null, note,
      node.status_reason ? h("div.note", node.status_reason) : null,
      reservationNote(node.reservation),
      h("div.cards",
        card("Memory", h("span.num", mem((g.memory_mb || 0) + (o.memory_mb || 0))), usageBar(cap.memory_mb || 0, g.memory_mb || 0, o.memory_mb || 0, mem)),
        card("vcores", h("span.num", num((g.vcores || 0) + (o.vcores || 0))), usageBar(cap.vcores || 0, g.vcores || 0, o.vcores || 0, (v) => `${v}`)),
        card("Running", h("span.num", num((node.running_guaranteed || 0) + (node.running_opportunistic || 0))),
          h("span", h("span.key.g", `${node.running_guaranteed || 0} G`), " · ", h("span.key.o", `${node.running_opportunistic || 0} O`))),
        card("Queued", h("span.num", num(node.queued || 0)), node.estimated_queue_wait_ns ? `~${Math.round(node.estimated_queue_wait_ns / 1e9)} s wait` : "opportunistic queue"),
        card("Capacity", h("span.num.small-value", res(cap)), `epoch ${node.epoch ?? "–"}`),
        measuredCard(node)),
      panel(`Active containers (${running.length})`, running.length ? table(containerColumns(), running, {}, { rowData: (c) => ({ container: c.id }) }) : empty("Nothing running on this node.")),
      panel(`Finished containers (${containers.length - running.length})`,
        containers.length - running.length ? table(containerColumns(), containers.filter((c) => !running.includes(c)).slice(-50), {}, { cls: "compact" }) : empty("None.")));
  };
  watch(`/v1/node/${encodeURIComponent(id)}`, ctx.signal, (data) => {
    node = asObject(data, "node");
    if (data && data.containers) containers = asList(data.containers, "containers").sort((a, b) => idOrder(a.id, b.id));
    err = null;
    draw();
  }, (e) => { err = e; draw(); });
  draw();
}

// measuredCard shows what the node's containers were measured to use,
// against what they are allocated: where it is well below, overcommit
// (its limit shown when the node overcommits) runs opportunistic work in
// the difference. Nothing until the node has reported a measurement.
function measuredCard(node) {
  const m = node.measured;
  if (!m) return null;
  const lim = node.use_limit;
  const detail = [lim ? `overcommit up to ${res(lim)}` : "no overcommit", node.enforcement ? `limits: ${node.enforcement}` : null].filter(Boolean).join(" · ");
  return card("In use (measured)", h("span.num.small-value", res(m)), detail, { dataset: { measured: "" } });
}

// reservationNote says which container of a capacity queue the node is
// held for: no other app's container is placed on it until that fits.
function reservationNote(r) {
  if (!r) return null;
  const what = r.is_am ? `the AM container of attempt ${r.attempt}` : `ask ${r.ask_id}`;
  return h("div.note.reservation", "Reserved for ", link(`/ui/apps/${encodeURIComponent(r.app_id)}`, r.app_id),
    ` (${what}, ${res(r.resources || {})}) since ${new Date(r.since / 1e6).toLocaleTimeString()}: no other app's container is placed here until it fits.`);
}
