// api.js: the JSON API under /v1/ as the pages use it — the ACL token on
// every request, errors as {status, message}, and blocking queries that
// follow X-Weft-Index so pages stay live without polling.

const TOKEN_KEY = "weft.token";

/** token returns the ACL token the user entered, or "". */
export function token() {
  return sessionStorage.getItem(TOKEN_KEY) || localStorage.getItem(TOKEN_KEY) || "";
}

/** setToken keeps tok for this tab, and on this browser if remember. */
export function setToken(tok, remember) {
  clearToken();
  if (!tok) return;
  (remember ? localStorage : sessionStorage).setItem(TOKEN_KEY, tok);
  tokenListeners.forEach((f) => f());
}

export function clearToken() {
  sessionStorage.removeItem(TOKEN_KEY);
  localStorage.removeItem(TOKEN_KEY);
}

const tokenListeners = new Set();
/** onToken calls f whenever a new token is set. */
export function onToken(f) {
  tokenListeners.add(f);
  return () => tokenListeners.delete(f);
}

/** APIError is a non-2xx answer: its status and the API's one-line error. */
export class APIError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

const deniedListeners = new Set();
/** onDenied calls f(err) when a request is refused with 403. */
export function onDenied(f) {
  deniedListeners.add(f);
  return () => deniedListeners.delete(f);
}

const liveListeners = new Set();
/** onLive calls f(ok, detail) after every request, for the live indicator. */
export function onLive(f) {
  liveListeners.add(f);
}
function live(ok, detail) {
  liveListeners.forEach((f) => f(ok, detail));
}

function headers(extra) {
  const h = { Accept: "application/json", ...extra };
  const tok = token();
  if (tok) h["X-Weft-Token"] = tok;
  return h;
}

/**
 * request sends one API request and returns {data, index, response}.
 * A non-2xx answer throws APIError with the API's message.
 */
export async function request(method, path, { body, signal, raw } = {}) {
  const init = { method, headers: headers(body ? { "Content-Type": "application/json" } : {}), signal };
  if (body !== undefined) init.body = JSON.stringify(body);
  let resp;
  try {
    resp = await fetch(path, init);
  } catch (err) {
    if (err.name !== "AbortError") live(false, "cannot reach the server");
    throw err;
  }
  const index = Number(resp.headers.get("X-Weft-Index") || 0);
  if (!resp.ok) {
    let message = resp.statusText;
    try {
      const j = await resp.json();
      if (j && j.error) message = j.error;
    } catch (_) { /* not JSON */ }
    const err = new APIError(resp.status, message);
    if (resp.status === 403) deniedListeners.forEach((f) => f(err));
    live(resp.status < 500, message);
    throw err;
  }
  live(true);
  if (raw) return { response: resp, index };
  const text = await resp.text();
  return { data: text ? JSON.parse(text) : null, index, response: resp };
}

export const get = (path, opts) => request("GET", path, opts).then((r) => r.data);

function withQuery(path, params) {
  const u = new URL(path, location.origin);
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== "") u.searchParams.set(k, v);
  return u.pathname + u.search;
}

const sleep = (ms, signal) =>
  new Promise((resolve) => {
    const t = setTimeout(resolve, ms);
    signal.addEventListener("abort", () => { clearTimeout(t); resolve(); }, { once: true });
  });

/**
 * watch keeps path's answer current: it calls onData(data) with the first
 * answer and again whenever the state index moves (a blocking query,
 * ?index=N&wait=30s), and onError(err) when a request fails (then it
 * retries with backoff). It stops when signal aborts.
 */
export function watch(path, signal, onData, onError) {
  (async () => {
    let index = 0;
    let backoff = 1000;
    while (!signal.aborted) {
      try {
        const q = index ? { index, wait: "30s" } : {};
        const r = await request("GET", withQuery(path, q), { signal });
        backoff = 1000;
        if (!index || r.index !== index) onData(r.data, r.index);
        if (!r.index) await sleep(3000, signal); // no blocking queries: poll
        if (r.index < index) index = 0; // a new leader or a restore: start over
        else index = r.index;
      } catch (err) {
        if (signal.aborted || err.name === "AbortError") return;
        if (onError) onError(err);
        await sleep(backoff, signal);
        backoff = Math.min(backoff * 2, 15000);
        if (err.status === 403) index = 0;
      }
    }
  })();
}

/** list returns a list answer as an array, whether bare or wrapped. */
export function asList(data, key) {
  if (Array.isArray(data)) return data;
  if (data && Array.isArray(data[key])) return data[key];
  return [];
}

/** asObject returns a single-item answer, whether bare or wrapped. */
export function asObject(data, key) {
  if (data && data[key] && typeof data[key] === "object" && !Array.isArray(data[key]) && !("id" in data)) return data[key];
  return data;
}

export { withQuery };
