// The exam countdown: counts the server's remaining seconds down and, at 0, opens the results
// (the server ended the exam at its deadline: nothing answered after it counts). Without
// JavaScript a refresh in <noscript> does the same.
(function () {
  var el = document.getElementById("countdown");
  if (!el) return;
  var end = Date.now() + 1000 * Number(el.dataset.seconds || 0);
  var summary = el.dataset.summaryUrl;
  function tick() {
    var left = Math.max(0, Math.ceil((end - Date.now()) / 1000));
    var s = left % 60;
    el.textContent = Math.floor(left / 60) + ":" + (s < 10 ? "0" : "") + s;
    if (left > 0) {
      setTimeout(tick, Math.min(500, Math.max(20, end - Date.now())));
    } else if (summary) {
      // A moment past the deadline, so the server's clock has passed it too.
      setTimeout(function () { window.location.assign(summary); }, 300);
    }
  }
  tick();
})();
