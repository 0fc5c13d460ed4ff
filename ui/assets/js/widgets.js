// widgets.js: the pieces every page is built from — state badges, bars,
// stat cards, sortable tables, empty and error notes.

import { h } from "./dom.js";
import { pct } from "./format.js";

const STATE_TONES = {
  RUNNING: "run", READY: "ok", FINISHED: "ok", COMPLETED: "ok", ACCEPTED: "wait", SUBMITTED: "wait",
  ALLOCATED: "wait", QUEUED: "wait", NEW: "wait", PAUSED: "warn", DRAINING: "warn", UNHEALTHY: "warn",
  FAILED: "bad", KILLED: "muted", DOWN: "bad", LOST: "bad", DECOMMISSIONED: "muted",
  leader: "run", follower: "ok", alive: "ok", failed: "bad", left: "muted",
  GUARANTEED: "g", OPPORTUNISTIC: "o",
};

/** badge is a coloured state label. */
export function badge(state, extra) {
  const tone = STATE_TONES[state] || "muted";
  return h(`span.badge.tone-${tone}`, { title: extra || state }, state || "–");
}

/** containerBadge is a container's state, red when it exited badly. */
export function containerBadge(c) {
  const bad = c.state === "COMPLETED" && ((c.exit_code !== null && c.exit_code !== undefined && c.exit_code !== 0) || (c.reason && c.reason !== "exited"));
  const el = badge(c.state, [c.reason, c.diagnostics].filter(Boolean).join(": "));
  if (bad) el.className = `badge tone-${["killed", "preempted", "drained", "node_stopped"].includes(c.reason) ? "warn" : "bad"}`;
  return el;
}

/**
 * bar draws shares of a whole: segments [{value, cls, label}] over total,
 * with optional markers [{value, cls, label}] as thin vertical lines.
 */
export function bar(total, segments, markers = [], opts = {}) {
  const el = h("div.bar", { class: `bar ${opts.cls || ""}`, role: "img" });
  const labels = [];
  let left = 0;
  for (const seg of segments) {
    const w = Math.max(0, Math.min(100 - left, total ? (100 * seg.value) / total : 0));
    if (w > 0) el.append(h(`span.seg.${seg.cls}`, { style: { left: `${left}%`, width: `${w}%` }, title: seg.label }));
    left += w;
    labels.push(seg.label);
  }
  for (const m of markers) {
    if (!total || m.value === undefined || m.value === null || m.value >= 9e18) continue;
    const at = Math.min(100, (100 * m.value) / total);
    el.append(h(`span.mark.${m.cls}`, { style: { left: `calc(${at}% - 1px)` }, title: m.label }));
    labels.push(m.label);
  }
  el.setAttribute("aria-label", labels.filter(Boolean).join(", "));
  return el;
}

/** usageBar is a capacity bar: guaranteed then opportunistic use. */
export function usageBar(capacity, g, o, unit) {
  const pg = pct(g, capacity), po = pct(o, capacity);
  return h("div.usage",
    bar(capacity, [
      { value: g, cls: "g", label: `guaranteed ${unit(g)} (${pg}%)` },
      { value: o, cls: "o", label: `opportunistic ${unit(o)} (${po}%)` },
    ]),
    h("span.usage-text.num", `${unit(g + o)} / ${unit(capacity)}`));
}

/** card is a stat card: a big number with a label and a detail line. */
export function card(label, value, detail, attrs = {}) {
  return h("section.card", attrs, h("div.card-label", label), h("div.card-value", value), detail ? h("div.card-detail", detail) : null);
}

/** panel is a titled section of a page. */
export function panel(title, ...body) {
  return h("section.panel", h("h2.panel-title", title), ...body);
}

/** pageHead is a page's title with a subtitle and actions. */
export function pageHead(title, sub, ...actions) {
  return h("header.page-head", h("div", h("h1", title), sub ? h("p.sub", sub) : null), h("div.actions", ...actions));
}

export const empty = (text) => h("p.empty", text);

/** errorNote shows a failed request: what happened and what to do. */
export function errorNote(err) {
  if (err && err.status === 403) {
    return h("div.note.note-bad", h("strong", "Permission denied. "), err.message || "",
      " — enter an ACL token with the ", h("em", "ACL token"), " button.");
  }
  return h("div.note.note-bad", h("strong", "Could not load: "), (err && err.message) || String(err));
}

/**
 * table renders rows with columns [{key, label, num, sort, render, cls}].
 * Clicking a header sorts by it; the sort survives re-renders through state.
 */
export function table(columns, rows, state = {}, opts = {}) {
  const sortCol = columns.find((c) => c.key === state.sort) || null;
  let sorted = rows;
  if (sortCol) {
    const val = sortCol.sort || ((r) => r[sortCol.key]);
    sorted = [...rows].sort((a, b) => {
      const x = val(a), y = val(b);
      const c = typeof x === "number" && typeof y === "number" ? x - y : String(x ?? "").localeCompare(String(y ?? ""), undefined, { numeric: true });
      return state.desc ? -c : c;
    });
  }
  const thead = h("thead", h("tr", columns.map((c) => {
    const th = h("th", { class: c.num ? "num" : "", scope: "col" }, c.label);
    if (c.key && opts.onSort) {
      th.classList.add("sortable");
      if (state.sort === c.key) th.classList.add(state.desc ? "desc" : "asc");
      th.addEventListener("click", () => opts.onSort(c.key, state.sort === c.key ? !state.desc : false));
    }
    return th;
  })));
  const tbody = h("tbody", sorted.map((r) => h("tr", { dataset: opts.rowData ? opts.rowData(r) : {} },
    columns.map((c) => h("td", { class: `${c.num ? "num" : ""} ${c.cls || ""}` }, c.render ? c.render(r) : r[c.key] ?? "–")))));
  return h("div.table-wrap", h("table.data", { class: `data ${opts.cls || ""}` }, thead, tbody));
}

/** filterBar is a row of labelled selects and inputs bound to values. */
export function filterBar(fields, values, onChange) {
  return h("form.filters", { onsubmit: (e) => e.preventDefault() }, fields.map((f) => {
    const id = `f-${f.key}`;
    let input;
    if (f.options) {
      input = h("select", { id, name: f.key, onchange: (e) => onChange(f.key, e.target.value) },
        h("option", { value: "" }, f.any || "any"),
        f.options.map((o) => h("option", { value: o, selected: values[f.key] === o }, o)));
    } else {
      input = h("input", { id, name: f.key, type: "search", value: values[f.key] || "", placeholder: f.placeholder || "",
        onchange: (e) => onChange(f.key, e.target.value.trim()) });
    }
    return h("label.filter", { for: id }, h("span", f.label), input);
  }));
}
