// confirm.js: the question asked before an action that changes the
// cluster (kill an app, drain a node) — a modal <dialog> in the page's own
// style rather than the browser's confirm(), which blocks the page, cannot
// offer a choice such as a deadline, and looks like a security warning.

import { h } from "./dom.js";

/**
 * ask shows a modal question and resolves to the values of its fields
 * ({name: value}) when the user confirms, or null when they cancel, press
 * Escape, or signal aborts (the page is left). title is a line; body is
 * what will happen; fields are extra form controls (named); ok labels the
 * confirming button, tone colours it ("danger", "warn" or "primary").
 */
export function ask({ title, body, fields = null, ok, tone = "primary", signal }) {
  return new Promise((resolve) => {
    let answer = null;
    const cancel = h("button.ghost", { type: "button", dataset: { cancel: "" } }, "Cancel");
    const form = h("form", { method: "dialog" },
      h("h2", title),
      h("p.muted", body),
      fields,
      h("div.actions", cancel, h("button", { type: "submit", class: tone, dataset: { confirm: "" } }, ok)));
    const dialog = h("dialog.modal.confirm-dialog", { "aria-label": title }, form);
    cancel.addEventListener("click", () => dialog.close());
    form.addEventListener("submit", (e) => {
      e.preventDefault();
      answer = Object.fromEntries(new FormData(form));
      dialog.close();
    });
    dialog.addEventListener("close", () => {
      dialog.remove();
      resolve(answer);
    }, { once: true });
    if (signal) signal.addEventListener("abort", () => dialog.open && dialog.close(), { once: true });
    document.body.append(dialog);
    dialog.showModal();
    // A destructive question starts on Cancel, so Enter does no harm.
    (tone === "danger" ? cancel : dialog.querySelector("[data-confirm]")).focus();
  });
}
