// Loaded before the dashboard's script: any error the page raises
// (a script that fails to parse included) is shown on the page and kept
// in window.loligoErrors, so that neither a user nor a test misses it.
"use strict";
window.loligoErrors = [];
function loligoShowError(text) {
  window.loligoErrors.push(text);
  var box = document.getElementById("errors");
  if (box) {
    box.hidden = false;
    box.textContent = "Page error: " + window.loligoErrors.join(" | ");
  }
}
window.addEventListener("error", function (e) {
  loligoShowError((e.message || "error") + " at " + (e.filename || "?") + ":" + (e.lineno || 0));
});
window.addEventListener("unhandledrejection", function (e) {
  loligoShowError("unhandled rejection: " + String(e.reason));
});
document.addEventListener("DOMContentLoaded", function () {
  if (window.loligoErrors.length) {
    loligoShowError("(before load)");
  }
});
