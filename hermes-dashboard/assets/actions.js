// Asks before a destructive action (a button with data-confirm) and adds a box selecting every
// job of a list. Without the script the forms still post, unconfirmed.
// The live refresh calls it again for the forms it brings.
window.hermesActions = function () {
  "use strict";
  document.querySelectorAll("form").forEach(function (form) {
    if (form.dataset.ready) { return; }
    form.dataset.ready = "1";
    form.addEventListener("submit", function (event) {
      var button = event.submitter;
      var question = button && button.getAttribute("data-confirm");
      if (question && !window.confirm(question)) { event.preventDefault(); }
    });
    if (!form.classList.contains("selection")) { return; }
    var boxes = form.querySelectorAll("input[type=checkbox][name=id]");
    var head = form.querySelector("th");
    if (boxes.length === 0 || !head) { return; }
    var all = document.createElement("input");
    all.type = "checkbox";
    all.className = "select-all";
    all.setAttribute("aria-label", "select every job of this page");
    all.addEventListener("change", function () {
      boxes.forEach(function (box) { box.checked = all.checked; });
    });
    head.appendChild(all);
  });
};
window.hermesActions();
