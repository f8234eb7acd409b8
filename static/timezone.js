// Tells the server the browser's time zone (an IANA name) in a cookie, so that days, streaks and
// deadlines read as the learner lives them; the pages work without it (UTC).
(function () {
  try {
    var zone = Intl.DateTimeFormat().resolvedOptions().timeZone;
    if (!zone || zone.length > 64 || !/^[A-Za-z0-9_+\-\/]+$/.test(zone)) return;
    var value = zone;
    if (document.cookie.split("; ").indexOf("infracards_tz=" + value) >= 0) return;
    document.cookie = "infracards_tz=" + value + "; path=/; max-age=31536000; samesite=lax";
  } catch (e) {}
})();
