// The memory calculator, live: re-submits its GET form as inputs change (the server renders the
// results; the page works the same without this script). After the reload it puts the focus, the
// caret and the scroll position back where they were.
(function () {
  "use strict";
  var form = document.getElementById("calc-form");
  if (!form) return;
  var KEY = "infracards-calculator";
  var timer = null;

  function store(state) {
    try { window.sessionStorage.setItem(KEY, JSON.stringify(state)); } catch (e) { /* private mode */ }
  }

  function restore() {
    var raw = null;
    try {
      raw = window.sessionStorage.getItem(KEY);
      window.sessionStorage.removeItem(KEY);
    } catch (e) { return; }
    if (!raw) return;
    var state;
    try { state = JSON.parse(raw); } catch (e) { return; }
    if (!state || state.path !== window.location.pathname) return;
    window.scrollTo(0, state.y || 0);
    var field = state.name ? form.elements.namedItem(state.name) : null;
    if (!field || typeof field.focus !== "function") return;
    field.focus({ preventScroll: true });
    if (field.type === "text" && typeof state.caret === "number") {
      try { field.setSelectionRange(state.caret, state.caret); } catch (e) { /* not a text field */ }
    }
  }

  function submitSoon(delay) {
    if (timer) window.clearTimeout(timer);
    timer = window.setTimeout(function () {
      var active = document.activeElement;
      var inForm = active && active.form === form;
      store({
        path: window.location.pathname,
        y: window.scrollY,
        name: inForm ? active.name : null,
        caret: inForm && active.type === "text" ? active.selectionStart : null
      });
      form.submit();
    }, delay);
  }

  form.addEventListener("change", function () { submitSoon(100); });
  form.addEventListener("input", function (event) {
    var target = event.target;
    if (target && target.tagName === "INPUT" && target.type === "text") submitSoon(900);
  });
  form.addEventListener("submit", function () { if (timer) window.clearTimeout(timer); });
  restore();
})();
