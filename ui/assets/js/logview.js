// logview.js: a container's stdout or stderr that follows as it grows,
// through /v1/container/{id}/logs with offsets (each answer says where the
// next read starts and whether the stream has ended).

import { request } from "./api.js";
import { h, replace } from "./dom.js";

const MAX_CHARS = 2 * 1024 * 1024; // keep the page light: the last 2 MiB

/**
 * readChunk reads a log from offset: the API answers text/plain with the
 * offset to read on from in X-Weft-Log-Offset and X-Weft-Log-Done "true"
 * once the container has ended and the answer reaches the end of its log.
 */
export async function readChunk(id, stream, offset, signal, decoder = new TextDecoder()) {
  const path = `/v1/container/${encodeURIComponent(id)}/logs?stream=${stream}&offset=${offset}`;
  const { response } = await request("GET", path, { signal, raw: true });
  const buf = new Uint8Array(await response.arrayBuffer());
  const next = response.headers.get("X-Weft-Log-Offset");
  return {
    text: decoder.decode(buf, { stream: true }), // a character split across reads stays whole
    next: next ? Number(next) : offset + buf.length,
    done: response.headers.get("X-Weft-Log-Done") === "true",
  };
}

/**
 * logViewer returns an element showing container id's logs, following
 * them (a read every second while the stream is open) until signal aborts.
 */
export function logViewer(id, signal, { stream = "stdout", height } = {}) {
  let current = null;
  const pre = h("pre.log", { tabindex: "0", "aria-label": "Container log", dataset: { container: id } });
  if (height) pre.style.height = height;
  const status = h("span.log-status", "");
  const follow = h("input", { type: "checkbox", checked: true });
  const tabs = ["stdout", "stderr"].map((s) => h("button", { type: "button", dataset: { stream: s }, onclick: () => start(s) }, s));
  const el = h("div.logview", h("div.log-bar", h("div.seg-toggle", tabs), h("label.check", follow, " follow"), status), pre);

  const start = (s) => {
    if (current) current.abort();
    current = new AbortController();
    signal.addEventListener("abort", () => current.abort(), { once: true });
    tabs.forEach((t) => t.classList.toggle("on", t.dataset.stream === s));
    replace(pre);
    pre.dataset.stream = s;
    run(s, current.signal);
  };

  const run = async (s, sig) => {
    let offset = 0, size = 0, backoff = 1000;
    const decoder = new TextDecoder();
    status.textContent = "loading…";
    status.className = "log-status";
    while (!sig.aborted) {
      let chunk;
      try {
        chunk = await readChunk(id, s, offset, sig, decoder);
        backoff = 1000;
      } catch (err) {
        if (sig.aborted) return;
        status.textContent = err.status === 404 ? "no logs (the container has not started, or they were removed)" : `cannot read: ${err.message}`;
        status.className = "log-status bad";
        if (err.status === 404 || err.status === 403) return;
        await wait(backoff, sig);
        backoff = Math.min(backoff * 2, 10000);
        continue;
      }
      if (chunk.text) {
        const atBottom = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 8;
        pre.append(chunk.text);
        size += chunk.text.length;
        if (size > MAX_CHARS) {
          pre.textContent = pre.textContent.slice(-MAX_CHARS / 2);
          size = pre.textContent.length;
        }
        if (follow.checked && atBottom) pre.scrollTop = pre.scrollHeight;
      }
      offset = chunk.next;
      if (chunk.done) {
        status.textContent = size ? `ended · ${offset.toLocaleString()} bytes` : "ended · empty";
        status.className = "log-status done";
        pre.dataset.done = "true";
        return;
      }
      status.textContent = "following…";
      status.className = "log-status live";
      if (!chunk.text) await wait(1000, sig);
    }
  };
  start(stream);
  return el;
}

const wait = (ms, signal) => new Promise((resolve) => {
  const t = setTimeout(resolve, ms);
  signal.addEventListener("abort", () => { clearTimeout(t); resolve(); }, { once: true });
});
