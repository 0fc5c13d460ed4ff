// containers.js: every container, filtered by state, app and node (the
// API's own filters: /v1/containers?app=&node=&state=), kept live.

import { asList, watch, withQuery } from "../api.js";
import { h, link, replace } from "../dom.js";
import { ago, duration, idOrder, nsToDate, res } from "../format.js";
import { badge, containerBadge, empty, errorNote, filterBar, pageHead, table } from "../widgets.js";

export const CONTAINER_STATES = ["ALLOCATED", "QUEUED", "RUNNING", "PAUSED", "COMPLETED"];

/** containerHref is a container's page, carrying its app so the page finds it at once. */
export function containerHref(c) {
  return `/ui/containers/${encodeURIComponent(c.id)}${c.app_id ? `?app=${encodeURIComponent(c.app_id)}` : ""}`;
}

export function render(main, ctx) {
  const filters = { state: ctx.query.get("state") || "", app: ctx.query.get("app") || "", node: ctx.query.get("node") || "" };
  const sort = { sort: "allocated_at", desc: true };
  let list = null, err = null, watching = null;
  const root = h("div.page#containers");
  main.append(root);
  const draw = () => {
    const shown = list || [];
    replace(root, pageHead("Containers", list ? `${shown.length} container${shown.length === 1 ? "" : "s"}` : ""),
      filterBar([
        { key: "state", label: "State", options: CONTAINER_STATES, any: "all states" },
        { key: "app", label: "App", placeholder: "app ID" },
        { key: "node", label: "Node", placeholder: "node ID" },
      ], filters, (k, v) => { filters[k] = v; ctx.setQuery(filters); start(); }),
      err ? errorNote(err) : null,
      list === null ? h("p.loading", "Loading…") : shown.length === 0 ? empty("No containers match.") :
        table(containerColumns(true), shown, sort, { onSort: (k, d) => { sort.sort = k; sort.desc = d; draw(); }, rowData: (c) => ({ container: c.id }) }));
  };
  const start = () => {
    if (watching) watching.abort();
    watching = new AbortController();
    ctx.signal.addEventListener("abort", () => watching.abort(), { once: true });
    list = null;
    draw();
    watch(withQuery("/v1/containers", filters), watching.signal, (data) => {
      list = asList(data, "containers").sort((a, b) => idOrder(a.id, b.id));
      err = null;
      draw();
    }, (e) => { err = e; draw(); });
  };
  ctx.every(10000, draw);
  start();
}

/** containerColumns are the containers table's columns; withApp adds the app. */
export function containerColumns(withApp) {
  return [
    { key: "id", label: "ID", cls: "mono", render: (c) => link(containerHref(c), c.id, c.is_am ? h("span.tag", "AM") : null) },
    withApp ? { key: "app_id", label: "App", cls: "mono", render: (c) => link(`/ui/apps/${encodeURIComponent(c.app_id)}`, c.app_id) } : null,
    { key: "execution_type", label: "Type", render: (c) => badge(c.execution_type) },
    { key: "node_id", label: "Node", cls: "mono", render: (c) => (c.node_id ? link(`/ui/nodes/${encodeURIComponent(c.node_id)}`, c.node_id) : "–") },
    { key: "state", label: "State", render: (c) => containerBadge(c) },
    { key: "exit_code", label: "Exit", num: true, sort: (c) => c.exit_code ?? -1, render: (c) => (c.exit_code === null || c.exit_code === undefined ? "–" : String(c.exit_code)) },
    { key: "reason", label: "Reason", render: (c) => c.reason || h("span.muted", "–") },
    { key: "resources", label: "Resources", num: true, sort: (c) => c.resources?.memory_mb || 0, render: (c) => res(c.resources) },
    { key: "allocated_at", label: "Allocated", num: true, render: (c) => ago(nsToDate(c.allocated_at)) },
    { key: "ran", label: "Ran", num: true, sort: (c) => (c.started_at ? (c.finished_at || Date.now() * 1e6) - c.started_at : -1),
      render: (c) => (c.started_at ? duration(((c.finished_at || Date.now() * 1e6) - c.started_at) / 1e6) : "–") },
    { key: "logs", label: "", render: (c) => link(containerHref(c), "logs →") },
  ].filter(Boolean);
}
