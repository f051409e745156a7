// The overview refreshes its counters and its throughput chart from /api/overview.
(function () {
  "use strict";
  // The page names the API's address, which holds the path the dashboard is mounted under.
  var API = document.currentScript.getAttribute("data-api");
  var SVG = "http://www.w3.org/2000/svg";
  var WIDTH = 600, HEIGHT = 160;

  function setText(id, text) {
    var element = document.getElementById(id);
    if (element) { element.textContent = text; }
  }

  function line(samples, key, top, first, last) {
    var span = Math.max(last - first, 1);
    return samples.map(function (s) {
      var x = ((s.at - first) / span) * WIDTH;
      var y = HEIGHT - (s[key] / top) * (HEIGHT - 10);
      return x.toFixed(1) + "," + y.toFixed(1);
    }).join(" ");
  }

  function draw(samples) {
    var chart = document.getElementById("chart");
    if (!chart) { return; }
    while (chart.firstChild) { chart.removeChild(chart.firstChild); }
    if (samples.length < 2) { return; }
    var top = 1;
    samples.forEach(function (s) { top = Math.max(top, s.handled, s.failed); });
    var first = samples[0].at, last = samples[samples.length - 1].at;
    ["handled", "failed"].forEach(function (series) {
      var path = document.createElementNS(SVG, "polyline");
      path.setAttribute("points", line(samples, series, top, first, last));
      path.setAttribute("fill", "none");
      path.setAttribute("stroke-width", "2");
      path.setAttribute("class", series);
      chart.appendChild(path);
    });
    setText("chart-top", top.toFixed(1) + " msgs/s");
    setText("chart-now", samples[samples.length - 1].handled.toFixed(1) + " msgs/s now");
    setText("chart-span", "(the last " + Math.round(last - first) + " s)");
  }

  function refresh() {
    // Paused by the nav's live button (see live.js).
    if (window.localStorage.getItem("hermes-live") === "off") {
      setTimeout(refresh, REFRESH_MS);
      return;
    }
    fetch(API, { cache: "no-store", credentials: "same-origin" })
      .then(function (response) { return response.ok ? response.json() : null; })
      .then(function (overview) {
        if (!overview) { return; }
        Object.keys(overview.totals).forEach(function (id) {
          setText(id, overview.totals[id]);
        });
        draw(overview.throughput.samples);
        // The server escapes every text of this table.
        var queues = document.getElementById("queues");
        if (queues) { queues.innerHTML = overview.queues_html; }
      })
      .catch(function () {})
      .then(function () { setTimeout(refresh, REFRESH_MS); });
  }

  var REFRESH_MS = 2000;
  refresh();
})();
