// format.js: numbers, resources and times as an operator reads them.

/** mem formats MiB as MiB/GiB/TiB with a sensible precision. */
export function mem(mb) {
  if (mb === undefined || mb === null) return "–";
  if (mb >= 9e18) return "∞";
  const units = [["TiB", 1024 * 1024], ["GiB", 1024], ["MiB", 1]];
  for (const [u, f] of units) {
    if (Math.abs(mb) >= f || f === 1) {
      const v = mb / f;
      const digits = f === 1 || Number.isInteger(v) ? 0 : v < 10 ? 1 : 0;
      return `${v.toFixed(digits)} ${u}`;
    }
  }
  return `${mb} MiB`;
}

/** vcores formats a vcore count. */
export function vcores(v) {
  if (v === undefined || v === null) return "–";
  if (v >= 9e18) return "∞";
  return `${v} vcore${v === 1 ? "" : "s"}`;
}

/** res formats a resource object {memory_mb, vcores, ...} on one line. */
export function res(r) {
  if (!r) return "–";
  const parts = [mem(r.memory_mb), vcores(r.vcores)];
  for (const [k, v] of Object.entries(r)) if (k !== "memory_mb" && k !== "vcores") parts.push(`${v} ${k}`);
  return parts.join(" · ");
}

export const isZero = (r) => !r || Object.values(r).every((v) => !v);

/** pct is a/b as a whole percentage (0 when b is 0). */
export function pct(a, b) {
  if (!b || b >= 9e18) return 0;
  return Math.round((100 * a) / b);
}

/** nsToDate reads weft's Unix-nanosecond times. */
export function nsToDate(ns) {
  return ns ? new Date(ns / 1e6) : null;
}

/** ago is a relative time: "12 s ago", "3 min ago", "in 5 min". */
export function ago(date, now = Date.now()) {
  if (!date) return "–";
  let d = Math.round((now - date.getTime()) / 1000);
  const future = d < 0;
  d = Math.abs(d);
  let txt;
  if (d < 5) return future ? "in a moment" : "just now";
  if (d < 60) txt = `${d} s`;
  else if (d < 3600) txt = `${Math.floor(d / 60)} min`;
  else if (d < 86400) txt = `${Math.floor(d / 3600)} h ${Math.floor((d % 3600) / 60)} min`;
  else txt = `${Math.floor(d / 86400)} d ${Math.floor((d % 86400) / 3600)} h`;
  return future ? `in ${txt}` : `${txt} ago`;
}

/** duration formats milliseconds compactly: "850 ms", "42 s", "3 min 10 s". */
export function duration(ms) {
  if (ms === null || ms === undefined || ms < 0) return "–";
  if (ms < 1) return "0 s";
  if (ms < 1000) return `${Math.round(ms)} ms`;
  const s = Math.round(ms / 1000);
  if (s < 60) return `${s} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min${s % 60 ? ` ${s % 60} s` : ""}`;
  return `${Math.floor(s / 3600)} h${s % 3600 >= 60 ? ` ${Math.floor((s % 3600) / 60)} min` : ""}`;
}

const STEPS_MS = [100, 200, 500, 1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 14400, 21600, 43200, 86400]
  .map((v, i) => (i < 3 ? v : v * 1000));

/** niceStep is a round interval (ms) that cuts spanMs into at most n parts, for axis ticks. */
export function niceStep(spanMs, n) {
  return STEPS_MS.find((st) => spanMs / st <= n) || Math.ceil(spanMs / n / 86400000) * 86400000;
}

/** tickLabel formats an axis offset exactly enough for round steps: "500 ms", "1.5 s", "2 min". */
export function tickLabel(ms) {
  if (ms < 0.5) return "0 s";
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60000) return `${Number((ms / 1000).toFixed(1))} s`;
  return duration(ms);
}

/** stamp is an absolute local time for tooltips. */
export function stamp(date) {
  return date ? date.toLocaleString() : "";
}

/** num formats a count with thousands separators. */
export const num = (n) => (n === undefined || n === null ? "–" : Number(n).toLocaleString());

/** idOrder sorts IDs like app-9 before app-10. */
export function idOrder(a, b) {
  return String(a).localeCompare(String(b), undefined, { numeric: true });
}
