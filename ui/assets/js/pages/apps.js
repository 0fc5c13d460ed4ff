// apps.js: every app, filtered by queue, state and user (the filters are
// the API's own: /v1/apps?queue=&state=&user=), kept live.

import { asList, watch, withQuery } from "../api.js";
import { h, link, replace } from "../dom.js";
import { ago, duration, idOrder, isZero, nsToDate, num, res, stamp } from "../format.js";
import { badge, empty, errorNote, filterBar, pageHead, table } from "../widgets.js";

export const APP_STATES = ["SUBMITTED", "ACCEPTED", "RUNNING", "FINISHED", "FAILED", "KILLED"];

export function render(main, ctx) {
  const filters = { queue: ctx.query.get("queue") || "", state: ctx.query.get("state") || "", user: ctx.query.get("user") || "" };
  const sort = { sort: "id", desc: true };
  let apps = null, queues = [], err = null, watching = null;
  const root = h("div.page#apps");
  main.append(root);

  const draw = () => {
    const bar = filterBar([
      { key: "queue", label: "Queue", options: queues, any: "all queues" },
      { key: "state", label: "State", options: APP_STATES, any: "all states" },
      { key: "user", label: "User", placeholder: "any user" },
    ], filters, (k, v) => { filters[k] = v; ctx.setQuery(filters); start(); });
    const shown = apps || [];
    replace(root, pageHead("Apps", apps ? `${shown.length} app${shown.length === 1 ? "" : "s"}${filtered() ? " matching" : ""}` : ""),
      bar, err ? errorNote(err) : null,
      apps === null ? h("p.loading", "Loading…") : shown.length === 0 ? empty(filtered() ? "No apps match these filters." : "No apps yet.") :
        table(appColumns(shown), shown, sort, { onSort: (k, desc) => { sort.sort = k; sort.desc = desc; draw(); }, rowData: (a) => ({ app: a.id }) }));
  };
  const filtered = () => filters.queue || filters.state || filters.user;
  const start = () => {
    if (watching) watching.abort();
    watching = new AbortController();
    ctx.signal.addEventListener("abort", () => watching.abort(), { once: true });
    apps = null;
    draw();
    watch(withQuery("/v1/apps", filters), watching.signal, (data) => {
      apps = asList(data, "apps").sort((a, b) => idOrder(a.id, b.id));
      err = null;
      draw();
    }, (e) => { err = e; draw(); });
  };
  watch("/v1/queues", ctx.signal, (data) => {
    queues = asList(data, "queues").filter((q) => q.leaf !== false).map((q) => q.name).sort();
    draw();
  }, () => {});
  ctx.every(10000, draw); // relative times
  start();
}

/** appColumns are the apps table's columns, shared with other pages; a
 * federation's router names each app's home sub-cluster, shown when any
 * of apps has one. */
export function appColumns(apps = []) {
  const cols = [
    { key: "id", label: "ID", render: (a) => link(`/ui/apps/${encodeURIComponent(a.id)}`, a.id), cls: "mono" },
    { key: "name", label: "Name", cls: "ellipsis" },
    { key: "user", label: "User" },
    { key: "queue", label: "Queue", cls: "mono", render: (a) => link(`/ui/apps?queue=${encodeURIComponent(a.queue)}`, a.queue) },
    { key: "state", label: "State", render: (a) => badge(a.state, a.diagnostics) },
    { key: "running", label: "Running", num: true, sort: (a) => a.containers?.running || 0, render: (a) => num(a.containers?.running || 0) },
    { key: "done", label: "Done", num: true, sort: (a) => a.containers?.completed || 0, render: (a) => num(a.containers?.completed || 0) },
    { key: "pending", label: "Pending", num: true, sort: (a) => a.pending?.memory_mb || 0,
      render: (a) => (isZero(a.pending) ? h("span.muted", "–") : h("span", { title: a.why_pending?.message || "" }, res(a.pending))) },
    { key: "am_attempts", label: "AM tries", num: true },
    { key: "submitted_at", label: "Submitted", num: true, render: (a) => h("span", { title: stamp(nsToDate(a.submitted_at)) }, ago(nsToDate(a.submitted_at))) },
    { key: "elapsed", label: "Elapsed", num: true, sort: (a) => (a.finished_at || Date.now() * 1e6) - a.submitted_at,
      render: (a) => duration(((a.finished_at || Date.now() * 1e6) - a.submitted_at) / 1e6) },
  ];
  if (apps.some((a) => a.home)) cols.splice(5, 0, { key: "home", label: "Home", cls: "mono" });
  return cols;
}
