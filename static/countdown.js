// The exam countdown: counts the server's remaining seconds down; the page works without it.
(function () {
  var el = document.getElementById("countdown");
  if (!el) return;
  var end = Date.now() + 1000 * Number(el.dataset.seconds || 0);
  function tick() {
    var left = Math.max(0, Math.round((end - Date.now()) / 1000));
    var s = left % 60;
    el.textContent = Math.floor(left / 60) + ":" + (s < 10 ? "0" : "") + s;
    if (left > 0) setTimeout(tick, 500);
  }
  tick();
})();
