// chart.js: the overview's utilisation-over-time chart, drawn as inline
// SVG from samples the page takes of /v1/status (no chart library).

import { s, h } from "./dom.js";
import { duration, niceStep, tickLabel } from "./format.js";

const KEY = "weft.samples";
const MAX_AGE_MS = 60 * 60 * 1000; // keep an hour
const MAX_SAMPLES = 720;

/** Samples is the chart's history, kept for this tab across reloads. */
export class Samples {
  constructor() {
    try {
      this.list = JSON.parse(sessionStorage.getItem(KEY) || "[]");
    } catch (_) {
      this.list = [];
    }
  }

  /** add records one sample {t, memG, memO, cpuG, cpuO} (fractions 0..1). */
  add(sample) {
    const last = this.list[this.list.length - 1];
    if (last && sample.t - last.t < 1000) this.list.pop();
    this.list.push(sample);
    const cutoff = sample.t - MAX_AGE_MS;
    while (this.list.length > MAX_SAMPLES || (this.list.length && this.list[0].t < cutoff)) this.list.shift();
    try {
      sessionStorage.setItem(KEY, JSON.stringify(this.list));
    } catch (_) { /* full: keep in memory */ }
  }
}

/** sampleOf turns a /v1/status answer into a chart sample. */
export function sampleOf(st, t = Date.now()) {
  const cap = st.capacity || {};
  const frac = (v, c) => (c ? Math.min(1, (v || 0) / c) : 0);
  return {
    t,
    memG: frac(st.used_guaranteed?.memory_mb, cap.memory_mb),
    memO: frac(st.used_opportunistic?.memory_mb, cap.memory_mb),
    cpuG: frac(st.used_guaranteed?.vcores, cap.vcores),
    cpuO: frac(st.used_opportunistic?.vcores, cap.vcores),
  };
}

const W = 760, H = 220, PAD = { l: 40, r: 12, t: 12, b: 26 };

const MIN_WINDOW_MS = 30 * 1000, MAX_WINDOW_MS = 10 * 60 * 1000;

/**
 * windowOf is the span the chart shows: from the first sample to now, at
 * least 30 s and at most ten minutes, so a young page's few samples fill
 * the chart instead of sitting at the end of an empty axis.
 */
export function windowOf(samples, now = Date.now()) {
  const age = samples.length ? now - samples[0].t : 0;
  return Math.min(MAX_WINDOW_MS, Math.max(MIN_WINDOW_MS, age));
}

/**
 * utilisationChart draws memory (guaranteed and opportunistic, stacked
 * areas) and vcores (a line) as a percentage of capacity over the window.
 */
export function utilisationChart(samples, now = Date.now()) {
  const windowMs = windowOf(samples, now);
  const pts = samples.filter((p) => p.t >= now - windowMs);
  const x = (t) => PAD.l + ((W - PAD.l - PAD.r) * (t - (now - windowMs))) / windowMs;
  const y = (f) => PAD.t + (H - PAD.t - PAD.b) * (1 - f);
  const svg = s("svg", { viewBox: `0 0 ${W} ${H}`, class: "chart", role: "img",
    "aria-label": `Cluster utilisation over the last ${duration(windowMs)}` });

  for (const f of [0, 0.25, 0.5, 0.75, 1]) {
    svg.append(s("line", { x1: PAD.l, x2: W - PAD.r, y1: y(f), y2: y(f), class: "grid" }));
    svg.append(s("text", { x: PAD.l - 6, y: y(f) + 4, class: "axis", "text-anchor": "end" }, `${f * 100}%`));
  }
  // Ticks back from "now" at a round step (-10 s, -20 s, …), with a
  // faint line each so the reader sees how far back the data goes.
  svg.append(s("text", { x: x(now), y: H - 6, class: "axis", "text-anchor": "end" }, "now"));
  const tick = niceStep(windowMs, 5);
  for (let ago = tick; ago <= windowMs; ago += tick) {
    const at = x(now - ago);
    if (W - PAD.r - at < 40) continue; // would overlap "now"
    svg.append(s("line", { x1: at, x2: at, y1: PAD.t, y2: H - PAD.b, class: "grid tick" }));
    svg.append(s("text", { x: at, y: H - 6, class: "axis", "text-anchor": at - PAD.l < 20 ? "start" : "middle" }, `-${tickLabel(ago)}`));
  }
  if (pts.length === 0) {
    svg.append(s("text", { x: W / 2, y: H / 2, class: "axis", "text-anchor": "middle" }, "collecting samples…"));
    return svg;
  }
  // Carry the last value to "now" so the chart reads as current.
  const series = [...pts, { ...pts[pts.length - 1], t: now }];
  const line = (get) => series.map((p, i) => `${i ? "L" : "M"}${x(p.t).toFixed(1)},${y(get(p)).toFixed(1)}`).join("");
  const area = (top, bottom) => {
    const up = series.map((p, i) => `${i ? "L" : "M"}${x(p.t).toFixed(1)},${y(top(p)).toFixed(1)}`).join("");
    const down = [...series].reverse().map((p) => `L${x(p.t).toFixed(1)},${y(bottom(p)).toFixed(1)}`).join("");
    return `${up}${down}Z`;
  };
  svg.append(s("path", { d: area((p) => p.memG, () => 0), class: "area-g" }));
  svg.append(s("path", { d: area((p) => p.memG + p.memO, (p) => p.memG), class: "area-o" }));
  svg.append(s("path", { d: line((p) => p.memG + p.memO), class: "line-mem" }));
  svg.append(s("path", { d: line((p) => p.cpuG + p.cpuO), class: "line-cpu" }));
  return svg;
}

/** legend names the chart's series. */
export function legend() {
  return h("div.legend",
    h("span", h("i.sw.g"), "memory, guaranteed"),
    h("span", h("i.sw.o"), "memory, opportunistic"),
    h("span", h("i.sw.cpu"), "vcores, all"));
}
