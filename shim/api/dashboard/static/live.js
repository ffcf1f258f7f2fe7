// The run page, live: each event of the run's stream re-renders the run's body
// from the server (which escapes everything); the stream resumes by itself.
(function () {
  "use strict";
  var body = document.getElementById("run-body");
  if (!body || !window.EventSource) { return; }
  var runId = body.getAttribute("data-run-id");
  // One fetch at a time; an event that arrives during one asks for one more after
  // it (dropping it could leave the page on a body rendered before the run ended).
  var pending = false;
  var again = false;
  function refresh() {
    if (pending) { again = true; return; }
    pending = true;
    again = false;
    function done() {
      pending = false;
      if (again) { refresh(); }
    }
    fetch("/dashboard/runs/" + runId + "/body", { credentials: "same-origin" })
      .then(function (r) { return r.ok ? r.text() : null; })
      .then(function (html) {
        if (html !== null) { body.innerHTML = html; }
        done();
      })
      .catch(done);
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
