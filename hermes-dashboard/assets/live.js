// Live refresh: every 2 s a page marked data-live reloads its main part in place, unless the
// refresh is paused (the nav's button; the choice is kept in this browser), the tab is hidden,
// or the reader is selecting jobs or typing. The overview's own script follows the same choice.
(function () {
  "use strict";
  var KEY = "hermes-live", EVERY_MS = 2000;
  var button = document.getElementById("live");
  function on() { return window.localStorage.getItem(KEY) !== "off"; }
  function show() {
    button.setAttribute("aria-pressed", on() ? "true" : "false");
    button.textContent = on() ? "Live: on" : "Live: paused";
    button.title = on() ? "Pause the live refresh" : "Resume the live refresh";
  }
  if (button) {
    button.hidden = false;
    button.addEventListener("click", function () {
      window.localStorage.setItem(KEY, on() ? "off" : "on");
      show();
    });
    show();
  }
  var main = document.querySelector("main[data-live]");
  if (!main) { return; }
  function busy() {
    var focused = document.activeElement;
    return main.querySelector("input:checked") !== null ||
      (focused !== null && main.contains(focused) && focused.tagName === "INPUT");
  }
  function refresh() {
    if (!on() || busy() || document.hidden) {
      setTimeout(refresh, EVERY_MS);
      return;
    }
    fetch(window.location.href, { cache: "no-store", credentials: "same-origin" })
      .then(function (response) { return response.ok ? response.text() : null; })
      .then(function (text) {
        if (!text || busy()) { return; }
        // The server escapes every text of the page it sends.
        var fresh = new DOMParser().parseFromString(text, "text/html")
          .querySelector("main[data-live]");
        if (fresh) {
          main.innerHTML = fresh.innerHTML;
          if (window.hermesActions) { window.hermesActions(); }
        }
      })
      .catch(function () {})
      .then(function () { setTimeout(refresh, EVERY_MS); });
  }
  setTimeout(refresh, EVERY_MS);
})();
