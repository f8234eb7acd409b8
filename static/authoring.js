// The template editor: check each formula as it is typed and show the parser's reason at its
// column. The form works without this script (problems are listed after saving).
(function () {
  var timers = new WeakMap();
  function show(input, result) {
    var out = document.getElementById(input.getAttribute("aria-describedby"));
    if (!out) return;
    out.textContent = "";
    input.classList.toggle("has-error", !result.ok);
    if (result.ok) return;
    var text = input.value;
    var at = result.position == null ? -1 : result.position - 1;  // columns count from 1
    var code = document.createElement("code");
    if (at >= 0 && at <= text.length) {
      code.appendChild(document.createTextNode(text.slice(0, at)));
      var mark = document.createElement("mark");
      mark.textContent = text.slice(at, at + 1) || " ";
      code.appendChild(mark);
      code.appendChild(document.createTextNode(text.slice(at + 1)));
    } else {
      code.textContent = text;
    }
    out.appendChild(code);
    out.appendChild(document.createTextNode(" " + result.message + (at >= 0 ? " (column " + (at + 1) + ")" : "")));
  }
  function check(input) {
    if (!input.value.trim()) { show(input, { ok: true }); return; }
    var url = "/instructor/check-formula?card_id=" + encodeURIComponent(input.dataset.card) +
      "&names=" + encodeURIComponent(input.dataset.names) + "&text=" + encodeURIComponent(input.value);
    fetch(url, { credentials: "same-origin" })
      .then(function (r) { return r.json(); })
      .then(function (result) { show(input, result); })
      .catch(function () {});
  }
  document.querySelectorAll("input[data-formula]").forEach(function (input) {
    input.addEventListener("input", function () {
      clearTimeout(timers.get(input));
      timers.set(input, setTimeout(function () { check(input); }, 250));
    });
    if (input.value) check(input);
  });
})();
