// The run page, live: each event of the run's stream re-renders the run's body
// from the server (which escapes everything); the stream resumes by itself.
(function () {
  "use strict";
  var body = document.getElementById("run-body");
  if (!body || !window.EventSource) { return; }
  var runId = body.getAttribute("data-run-id");
  var pending = false;
  function refresh() {
    if (pending) { return; }
    pending = true;
    fetch("/dashboard/runs/" + runId + "/body", { credentials: "same-origin" })
      .then(function (r) { return r.ok ? r.text() : null; })
      .then(function (html) {
        pending = false;
        if (html !== null) { body.innerHTML = html; }
      })
      .catch(function () { pending = false; });
  }
  var source = new EventSource("/dashboard/runs/" + runId + "/events");
  var log = document.getElementById("event-log");
  function note(e) {
    if (log) {
      var li = document.createElement("li");
      li.textContent = "#" + e.lastEventId + " " + e.type;
      log.insertBefore(li, log.firstChild);
    }
    refresh();
  }
  ["run.accepted", "run.phase", "step.started", "step.finished", "ledger.written",
   "episode", "approval", "message"].forEach(function (kind) {
    source.addEventListener(kind, note);
  });
  source.addEventListener("end", function () {
    source.close();
    document.body.setAttribute("data-stream", "ended");
    refresh();
  });
  document.body.setAttribute("data-stream", "open");
})();
