// The template editor and the card form: check each formula as it is typed and show the
// parser's reason at its column. The forms work without this script (problems show on saving).
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
  var cardParamsField = document.getElementById("f-card-params");
  var identifier = /^[A-Za-z_][A-Za-z0-9_]*$/;
  function names(input) {
    var found = (input.dataset.names || "").split(",").filter(Boolean);
    // A card formula: the card's parameters as typed, and the ids of the formulas above it.
    if (input.dataset.scope === "card") {
      if (cardParamsField) {
        cardParamsField.value.split(/[\s,]+/).forEach(function (name) {
          if (identifier.test(name)) found.push(name);
        });
      }
      document.querySelectorAll("input[data-formula-name]").forEach(function (idField) {
        var name = idField.value.trim();
        if (Number(idField.dataset.formulaName) < Number(input.dataset.row) && identifier.test(name)) found.push(name);
      });
      return found.join(",");
    }
    [paramsField, derivedField].forEach(function (field) {
      if (!field) return;
      field.value.split("\n").forEach(function (line) {
        var name = line.split("=")[0].trim();
        if (line.indexOf("=") > 0 && identifier.test(name)) found.push(name);
      });
    });
    return found.join(",");
  }
  function check(input) {
    if (!input.value.trim()) { show(input, { ok: true }); return; }
    var url = "/instructor/check-formula?card_id=" + encodeURIComponent(input.dataset.card) +
      "&names=" + encodeURIComponent(names(input)) + "&text=" + encodeURIComponent(input.value) +
      (input.dataset.scope ? "&scope=" + encodeURIComponent(input.dataset.scope) : "");
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
  function recheck() {
    formulas.forEach(function (input) { if (input.value) later(input); });
  }
  [paramsField, derivedField, cardParamsField].forEach(function (field) {
    if (field) field.addEventListener("input", recheck);
  });
  // A card formula renamed: the formulas below it are checked again.
  document.querySelectorAll("input[data-formula-name]").forEach(function (idField) {
    idField.addEventListener("input", recheck);
  });
})();
