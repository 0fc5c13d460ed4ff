// container.js: one container — what it is and where it runs — and its
// logs, followed while it runs.

import { asList, watch } from "../api.js";
import { h, link, replace } from "../dom.js";
import { ago, duration, nsToDate, res, stamp } from "../format.js";
import { logViewer } from "../logview.js";
import { badge, containerBadge, errorNote, pageHead, panel } from "../widgets.js";

export function render(main, ctx) {
  const id = ctx.params[0];
  const app = ctx.query.get("app") || "";
  let c = null, err = null, missing = false;
  const logs = logViewer(id, ctx.signal, { height: "calc(100vh - 330px)" });
  const root = h("div.page#container");
  main.append(root);
  const draw = () => {
    const pre = logs.querySelector("pre");
    const scroll = pre.scrollTop;
    replace(root,
      pageHead(h("span", h("span.mono", id), " ", c ? containerBadge(c) : null), c ? h("span", "container of ", link(`/ui/apps/${encodeURIComponent(c.app_id)}`, c.app_id)) : ""),
      err ? errorNote(err) : null,
      missing ? h("div.note.note-bad", `No container ${id} in the cluster's state (it may have been garbage-collected).`) : null,
      c ? facts(c) : null,
      panel("Logs", logs));
    pre.scrollTop = scroll;
  };
  watch(app ? `/v1/containers?app=${encodeURIComponent(app)}` : "/v1/containers", ctx.signal, (data) => {
    c = asList(data, "containers").find((x) => x.id === id) || null;
    missing = !c;
    err = null;
    draw();
  }, (e) => { err = e; draw(); });
  draw();
}

function facts(c) {
  const item = (k, v) => h("div.fact", h("dt", k), h("dd", v));
  const st = nsToDate(c.started_at), fin = nsToDate(c.finished_at);
  return h("dl.facts",
    item("Type", h("span", badge(c.execution_type), c.is_am ? h("span.tag", "AM") : null)),
    item("Node", c.node_id ? link(`/ui/nodes/${encodeURIComponent(c.node_id)}`, c.node_id) : "–"),
    item("Resources", res(c.resources)),
    item("Attempt", String(c.attempt ?? "–")),
    item("Allocated", h("span", { title: stamp(nsToDate(c.allocated_at)) }, ago(nsToDate(c.allocated_at)))),
    item("Started", h("span", { title: stamp(st) }, st ? ago(st) : "not yet")),
    item(fin ? "Ran" : "Running", st ? duration(((fin ? fin.getTime() : Date.now()) - st.getTime())) : "–"),
    item("Exit", c.exit_code === null || c.exit_code === undefined ? "–" : `${c.exit_code}${c.reason ? ` (${c.reason})` : ""}`),
    c.diagnostics ? item("Diagnostics", c.diagnostics) : null);
}
