// A file field with data-max-bytes refuses a larger file before it is sent: the browser shows
// the field's data-too-large text (the server words it in the page's language) and keeps the
// form from being submitted. Without this script the server refuses it after the upload.
(function () {
  var inputs = document.querySelectorAll("input[type=file][data-max-bytes]");
  Array.prototype.forEach.call(inputs, function (input) {
    var limit = Number(input.getAttribute("data-max-bytes"));
    function check() {
      var file = input.files && input.files[0];
      var tooLarge = Boolean(file && limit > 0 && file.size > limit);
      input.setCustomValidity(tooLarge ? input.getAttribute("data-too-large") || "" : "");
      return !tooLarge;
    }
    input.addEventListener("change", function () {
      if (!check()) input.reportValidity();
    });
    check();
  });
})();
