// queues.js: the queue tree — each queue's use against its instantaneous
// and steady fair shares, min and max, pending demand, policy and weight.

import { asList, watch } from "../api.js";
import { h, link, replace } from "../dom.js";
import { isZero, mem, num } from "../format.js";
import { bar, empty, errorNote, pageHead, panel } from "../widgets.js";

const DIMS = {
  memory: { key: "memory_mb", fmt: mem, label: "Memory" },
  vcores: { key: "vcores", fmt: (v) => (v >= 9e18 ? "∞" : `${v}`), label: "vcores" },
};

export function render(main, ctx) {
  let queues = null, err = null;
  let dim = ctx.query.get("dim") === "vcores" ? "vcores" : "memory";
  const root = h("div.page#queues");
  main.append(root);
  const draw = () => {
    const toggle = h("div.seg-toggle", { role: "group", "aria-label": "Resource" }, Object.entries(DIMS).map(([k, d]) =>
      h("button", { type: "button", class: k === dim ? "on" : "", dataset: { dim: k }, "aria-pressed": String(k === dim), onclick: () => { dim = k; ctx.setQuery({ dim: k === "memory" ? "" : k }); draw(); } }, d.label)));
    replace(root, pageHead("Queues", "Use against fair share, per queue. Bars are to scale with the cluster.", toggle),
      err ? errorNote(err) : null,
      queues === null ? h("p.loading", "Loading…") : queues.length === 0 ? empty("No queues.") : panel("Queue tree", queueLegend(), queueTable(queues, DIMS[dim])));
  };
  watch("/v1/queues", ctx.signal, (data) => { queues = asList(data, "queues"); err = null; draw(); }, (e) => { err = e; draw(); });
  draw();
}

/** treeOrder lists queues parents first, children in their given order. */
function treeOrder(queues) {
  const byName = new Map(queues.map((q) => [q.name, q]));
  const out = [], seen = new Set();
  const visit = (q) => {
    if (!q || seen.has(q.name)) return;
    seen.add(q.name);
    out.push(q);
    const kids = q.children?.length ? q.children : queues.filter((c) => c.parent === q.name).map((c) => c.name);
    kids.forEach((name) => visit(byName.get(name) || byName.get(`${q.name}.${name}`)));
  };
  queues.filter((q) => !q.parent || !byName.has(q.parent)).forEach(visit);
  queues.forEach(visit);
  return out;
}

function queueLegend() {
  return h("div.legend",
    h("span", h("i.sw.used"), "used"),
    h("span", h("i.sw.pend"), "pending"),
    h("span", h("i.mk.inst"), "instantaneous fair share"),
    h("span", h("i.mk.steady"), "steady fair share"),
    h("span", h("i.mk.min"), "min"),
    h("span", h("i.mk.max"), "max"));
}

function queueTable(queues, d) {
  const ordered = treeOrder(queues);
  const top = ordered[0];
  const scale = Math.max(1, ...ordered.map((q) => Math.max(q.steady_fair_share?.[d.key] || 0, (q.used?.[d.key] || 0) + (q.pending?.[d.key] || 0), q.instantaneous_fair_share?.[d.key] || 0)).filter((v) => v < 9e18));
  const total = top ? Math.max(top.steady_fair_share?.[d.key] || 0, scale) : scale;
  const v = (r) => (r ? r[d.key] || 0 : 0);
  const rows = ordered.map((q) => {
    const used = v(q.used), pend = v(q.pending), inst = v(q.instantaneous_fair_share), steady = v(q.steady_fair_share);
    const max = q.max_resources ? q.max_resources[d.key] : null;
    const over = inst > 0 && used > inst;
    return h("tr", { dataset: { queue: q.name } },
      h("td.qname", h("span.indent", { style: { width: `${(q.depth || 0) * 18}px` } }),
        h("span", { class: q.leaf ? "leaf" : "parent" }, q.name.split(".").pop()),
        h("div.qpath.mono", q.name),
        q.capacity ? h("div.qcap.small", { dataset: { capacity: String(q.capacity.capacity) } },
          `capacity ${num(q.capacity.capacity)}% · max ${num(q.capacity.max_capacity)}% · using ${Math.round(q.capacity.used_capacity)}% of it`) : null),
      h("td", h("span.pill", q.policy || "–")),
      h("td.num", num(q.weight)),
      h("td.num", q.leaf ? num(q.running_apps) : h("span.muted", num(q.running_apps))),
      h("td.qbar",
        bar(total, [
          { value: used, cls: over ? "used-over" : "used", label: `used ${d.fmt(used)}` },
          { value: pend, cls: "pend", label: `pending ${d.fmt(pend)}` },
        ], [
          { value: inst, cls: "inst", label: `instantaneous fair share ${d.fmt(inst)}` },
          { value: steady, cls: "steady", label: `steady fair share ${d.fmt(steady)}` },
          { value: v(q.min_resources) || null, cls: "min", label: `min ${d.fmt(v(q.min_resources))}` },
          { value: max, cls: "max", label: `max ${d.fmt(max)}` },
        ], { cls: "bar-lg" }),
        h("div.qnums.num",
          h("span", h("b", d.fmt(used)), " used"),
          h("span", d.fmt(inst), q.capacity ? " capacity" : " inst."),
          q.capacity ? null : h("span", d.fmt(steady), " steady"))),
      h("td.num", isZero(q.pending) ? h("span.muted", "–") : d.fmt(pend)),
      h("td.num.minmax", v(q.min_resources) ? h("div", d.fmt(v(q.min_resources))) : h("div.muted", "no min"), h("div.muted", max === null || max === undefined ? "no max" : d.fmt(max))),
      h("td.small", q.leaf ? link(`/ui/apps?queue=${encodeURIComponent(q.name)}`, "apps →") : null));
  });
  return h("div.table-wrap", h("table.data.queues",
    h("thead", h("tr", ["Queue", "Policy", "Weight", "Apps", `${d.label}: used vs fair share`, "Pending", "Min / max", ""].map((l, i) =>
      h("th", { class: [2, 3, 5, 6].includes(i) ? "num" : "", scope: "col" }, l)))),
    h("tbody", rows)));
}
