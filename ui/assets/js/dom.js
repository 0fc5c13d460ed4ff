// dom.js: building the page from data with no innerHTML, so nothing a
// cluster reports (app names, diagnostics, logs) is ever parsed as markup,
// and no inline style attribute the Content-Security-Policy would refuse.

/**
 * h creates an element: h("a.cls#id", {href, onclick, style: {width}}, ...children).
 * Children may be strings, numbers, nodes, arrays or null (skipped).
 */
export function h(tag, attrs, ...children) {
  if (attrs === null || typeof attrs !== "object" || attrs instanceof Node || Array.isArray(attrs)) {
    children.unshift(attrs);
    attrs = {};
  }
  const [name, ...parts] = tag.split(/(?=[.#])/);
  const el = document.createElement(name || "div");
  for (const p of parts) {
    if (p[0] === ".") el.classList.add(p.slice(1));
    else el.id = p.slice(1);
  }
  setAttrs(el, attrs);
  append(el, children);
  return el;
}

const SVG_NS = "http://www.w3.org/2000/svg";
/** s creates an SVG element with attributes. */
export function s(tag, attrs = {}, ...children) {
  const el = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs)) if (v !== undefined && v !== null) el.setAttribute(k, v);
  append(el, children);
  return el;
}

function setAttrs(el, attrs) {
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "style") Object.assign(el.style, v);
    else if (k === "class") el.className = v;
    else if (k === "dataset") Object.assign(el.dataset, v);
    else if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k in el && typeof v !== "string") el[k] = v;
    else el.setAttribute(k, v === true ? "" : v);
  }
}

function append(el, children) {
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : String(c));
  }
}

/** replace swaps el's children for the given ones. */
export function replace(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

/** link is an in-app link: navigation without a page load. */
export function link(href, ...children) {
  return h("a", { href, dataset: { link: "" } }, ...children);
}
