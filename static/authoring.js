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
    // The reason and its column, both in the page's language (the server words them).
    out.appendChild(document.createTextNode(" " + result.message + (result.where ? " (" + result.where + ")" : "")));
  }
  // The parameters a formula may use: the card's (data-names) and the template's, read from the
  // parameters field as typed ("name = v1, v2 | format" per line), saved or not.
  var paramsField = document.getElementById("f-params");
  var derivedField = document.getElementById("f-derived");
  function names(input) {
    var found = (input.dataset.names || "").split(",").filter(Boolean);
    [paramsField, derivedField].forEach(function (field) {
      if (!field) return;
      field.value.split("\n").forEach(function (line) {
        var name = line.split("=")[0].trim();
        if (line.indexOf("=") > 0 && /^[A-Za-z_][A-Za-z0-9_]*$/.test(name)) found.push(name);
      });
    });
    return found.join(",");
  }
  function check(input) {
    if (!input.value.trim()) { show(input, { ok: true }); return; }
    var url = "/instructor/check-formula?card_id=" + encodeURIComponent(input.dataset.card) +
      "&names=" + encodeURIComponent(names(input)) + "&text=" + encodeURIComponent(input.value);
    fetch(url, { credentials: "same-origin" })
      .then(function (r) { return r.json(); })
      .then(function (result) { show(input, result); })
      .catch(function () {});
  }
  var formulas = document.querySelectorAll("input[data-formula]");
  function later(input) {
    clearTimeout(timers.get(input));
    timers.set(input, setTimeout(function () { check(input); }, 250));
  }
  formulas.forEach(function (input) {
    input.addEventListener("input", function () { later(input); });
    if (input.value) check(input);
  });
  // A parameter added or renamed: the formulas are checked again against the new names.
  [paramsField, derivedField].forEach(function (field) {
    if (!field) return;
    field.addEventListener("input", function () {
      formulas.forEach(function (input) { if (input.value) later(input); });
    });
  });
})();
