// The card page while its draft is validated: poll the validation job, show templates done of
// the total, and reload the page (which then lists the problems) when it is done. Without this
// script the page refreshes itself every few seconds (a <noscript> refresh).
(function () {
  var box = document.querySelector("[data-validation]");
  if (!box) return;
  var url = "/instructor/validations/" + encodeURIComponent(box.dataset.validation);
  var bar = box.querySelector("progress");
  var text = box.querySelector("[data-progress-text]");
  function poll() {
    fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (r) { return r.ok ? r.json() : Promise.reject(r.status); })
      .then(function (job) {
        if (job.status === "done") { window.location.reload(); return; }
        if (job.templates_total != null) {
          bar.max = job.templates_total;
          bar.value = job.templates_done;
          text.textContent = job.text;
        }
        setTimeout(poll, 700);
      })
      .catch(function () { setTimeout(poll, 3000); });
  }
  setTimeout(poll, 300);
})();
