// main.js: the router (pages by path under /ui/, links without reloads),
// the ACL token dialog and the live indicator.

import { clearToken, onDenied, onLive, onToken, setToken, token } from "./api.js";
import { h, replace } from "./dom.js";
import * as overview from "./pages/overview.js";
import * as queues from "./pages/queues.js";
import * as apps from "./pages/apps.js";
import * as app from "./pages/app.js";
import * as nodes from "./pages/nodes.js";
import * as node from "./pages/node.js";
import * as containers from "./pages/containers.js";
import * as container from "./pages/container.js";

const routes = [
  [/^\/ui\/?$/, overview, "overview"],
  [/^\/ui\/queues\/?$/, queues, "queues"],
  [/^\/ui\/apps\/?$/, apps, "apps"],
  [/^\/ui\/apps\/([^/]+)\/?$/, app, "apps"],
  [/^\/ui\/nodes\/?$/, nodes, "nodes"],
  [/^\/ui\/nodes\/([^/]+)\/?$/, node, "nodes"],
  [/^\/ui\/containers\/?$/, containers, "containers"],
  [/^\/ui\/containers\/([^/]+)\/?$/, container, "containers"],
];

const main = document.getElementById("main");
let current = null; // AbortController of the page on screen

function route() {
  if (current) current.abort();
  current = new AbortController();
  const path = location.pathname;
  const match = routes.map(([re, page, nav]) => [path.match(re), page, nav]).find(([m]) => m);
  document.querySelectorAll("[data-nav]").forEach((a) => a.classList.toggle("active", !!match && a.dataset.nav === match[2]));
  replace(main);
  if (!match) {
    main.append(h("div.page", h("h1", "Not found"), h("p", "No page at ", h("code", path), ". ", h("a", { href: "/ui/", dataset: { link: "" } }, "Back to the overview"))));
    return;
  }
  const [m, page] = match;
  const signal = current.signal;
  const ctx = {
    signal,
    params: m.slice(1).map(decodeURIComponent),
    query: new URLSearchParams(location.search),
    navigate,
    /** setQuery replaces the URL's query without reloading the page. */
    setQuery(values) {
      const q = new URLSearchParams();
      for (const [k, v] of Object.entries(values)) if (v) q.set(k, v);
      const s = q.toString();
      history.replaceState(null, "", location.pathname + (s ? `?${s}` : ""));
    },
    /** every calls f every ms until the page is left. */
    every(ms, f) {
      const t = setInterval(f, ms);
      signal.addEventListener("abort", () => clearInterval(t), { once: true });
    },
  };
  page.render(main, ctx);
  main.focus({ preventScroll: true });
}

/** navigate shows the page at url, adding it to the history. */
export function navigate(url) {
  history.pushState(null, "", url);
  window.scrollTo(0, 0);
  route();
}

document.addEventListener("click", (e) => {
  const a = e.target.closest("a[data-link]");
  if (!a || e.metaKey || e.ctrlKey || e.shiftKey || e.button !== 0) return;
  e.preventDefault();
  if (a.getAttribute("href") !== location.pathname + location.search) navigate(a.getAttribute("href"));
});
window.addEventListener("popstate", route);

// The token dialog: opened by the button, or by any 403.
const dialog = document.getElementById("token-dialog");
const input = document.getElementById("token-input");
const why = document.getElementById("token-why");
const button = document.getElementById("token-button");

function openTokenDialog(reason) {
  why.textContent = reason || "Requests carry this token in the X-Weft-Token header. It is kept in this browser only.";
  input.value = "";
  if (!dialog.open) dialog.showModal();
  input.focus();
}
function showToken() {
  const has = !!token();
  button.textContent = has ? "ACL token ✓" : "ACL token";
  button.classList.toggle("set", has);
  button.title = has ? "A token is set; click to change or forget it" : "No token: requests are anonymous";
}
button.addEventListener("click", () => openTokenDialog());
document.getElementById("token-cancel").addEventListener("click", () => dialog.close());
document.getElementById("token-clear").addEventListener("click", () => {
  clearToken();
  showToken();
  dialog.close();
  route();
});
document.getElementById("token-form").addEventListener("submit", (e) => {
  e.preventDefault();
  const tok = input.value.trim();
  if (!tok) return;
  setToken(tok, document.getElementById("token-remember").checked);
  dialog.close();
});
onToken(() => {
  showToken();
  route();
});
let lastDenied = 0;
onDenied((err) => {
  // One prompt per burst of refused requests (a page makes several).
  if (dialog.open || Date.now() - lastDenied < 2000) return;
  lastDenied = Date.now();
  // Without a token the server's long explanation (shown on the page
  // behind) says no more than this; with one, what was denied matters.
  openTokenDialog(token()
    ? `The token you entered is not allowed to see this: ${err.message}. Enter another token.`
    : "This cluster has ACLs on and refuses anonymous requests. Enter an ACL token to continue.");
});

// The live indicator: green while requests succeed.
const liveEl = document.getElementById("live");
const liveText = document.getElementById("live-text");
onLive((ok, detail) => {
  liveEl.classList.toggle("ok", ok);
  liveEl.classList.toggle("bad", !ok);
  liveText.textContent = ok ? "live" : "offline";
  liveEl.title = ok ? "Live: pages follow the cluster through blocking queries" : detail || "offline";
});

showToken();
route();
