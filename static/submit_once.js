// A form marked data-submit-once (a practice session's start, a question's answer) is sent once:
// its buttons are disabled while the request is in flight, so a double click sends one request.
// The server makes a repeat harmless anyway (the form's client_session_id or client_answer_id
// names one start or one answer); without this script the forms work as before. A page shown
// again from the back/forward cache gets its buttons back (pageshow), and so does one whose
// request the browser stopped or that is still unanswered after RETRY_MS.
(function () {
  var RETRY_MS = 10000;
  var BUSY = "data-submitting";

  function setBusy(form, busy) {
    if (busy) {
      form.setAttribute(BUSY, "");
      form.setAttribute("aria-busy", "true");
    } else {
      form.removeAttribute(BUSY);
      form.removeAttribute("aria-busy");
    }
    var buttons = form.querySelectorAll("button, input[type=submit]");
    Array.prototype.forEach.call(buttons, function (button) {
      button.disabled = busy;
    });
  }

  document.addEventListener("submit", function (event) {
    var form = event.target;
    if (!(form instanceof HTMLFormElement) || !form.hasAttribute("data-submit-once")) return;
    if (event.defaultPrevented) return;
    if (form.hasAttribute(BUSY)) {
      event.preventDefault(); // a second click before the buttons went grey
      return;
    }
    form.setAttribute(BUSY, "");
    // Disabled once this submission has read its fields: a disabled button sends no name=value.
    setTimeout(function () {
      if (form.hasAttribute(BUSY)) setBusy(form, true);
    }, 0);
    form.submitOnceRetry = setTimeout(function () {
      release(form);
    }, RETRY_MS);
  });

  function release(form) {
    clearTimeout(form.submitOnceRetry);
    setBusy(form, false);
  }

  window.addEventListener("pageshow", function () {
    Array.prototype.forEach.call(document.querySelectorAll("form[data-submit-once]"), release);
  });
})();
