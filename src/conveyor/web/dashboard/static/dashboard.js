// The Conveyor dashboard's only script. Every page works without it: it adds live updates (the
// page's #live region is fetched again every few seconds and swapped in), "pick every job", and a
// confirmation dialog before deleting. Everything swapped in was rendered and escaped by the server.
"use strict";

(function () {
  const body = document.body;
  const live = document.getElementById("live");
  const status = document.getElementById("live-status");
  const seconds = parseFloat(body.dataset.refresh || "0");

  function busy() {
    // Leave the region alone while someone works in it: a picked job, a field being typed in.
    if (!live) return true;
    if (live.querySelector("input[type=checkbox]:checked")) return true;
    const active = document.activeElement;
    return Boolean(active && live.contains(active) && active.matches("input, select, textarea"));
  }

  async function refresh() {
    if (document.hidden || busy()) return;
    try {
      const response = await fetch(window.location.href, {
        headers: { "X-Conveyor-Live": "1" },
        credentials: "same-origin",
      });
      if (!response.ok) throw new Error(String(response.status));
      const page = new DOMParser().parseFromString(await response.text(), "text/html");
      const fresh = page.getElementById("live");
      if (fresh && !busy()) {
        live.replaceChildren(...Array.from(fresh.childNodes).map((n) => document.importNode(n, true)));
        wire(live);
      }
      if (status) { status.hidden = false; status.textContent = "live · " + new Date().toLocaleTimeString(); }
    } catch (error) {
      if (status) { status.hidden = false; status.textContent = "live updates paused (" + error.message + ")"; }
    }
  }

  function wire(root) {
    root.querySelectorAll("[data-pick-all]").forEach((box) => {
      box.addEventListener("change", () => {
        document.querySelectorAll("input[name=ids][form=picked-jobs]").forEach((one) => {
          one.checked = box.checked;
        });
      });
    });
    root.querySelectorAll("form[data-confirm]").forEach((form) => {
      form.addEventListener("submit", (event) => {
        if (!window.confirm(form.dataset.confirm)) { event.preventDefault(); return; }
        form.querySelectorAll("[data-confirmed]").forEach((field) => { field.disabled = false; });
      });
    });
  }

  wire(document);
  if (live && live.dataset.live === "on" && seconds > 0) {
    window.setInterval(refresh, seconds * 1000);
  }
})();
