-- Gatehouse ledger, version 12: each run's event stream.
-- One row per thing that happened to a run (accepted, phase changed, step
-- started or finished, ledger entry written, episode, decision, message),
-- written in the same transaction as the change it reports. seq counts from 1
-- per run; writers take the run's row lock first (PostgreSQL), so a seq is
-- visible only after every smaller one is: a reader that resumes after seq N
-- misses nothing. notify_pending = 1 marks events the notifier has yet to fan
-- out to its sinks (NULL once it has).

CREATE TABLE run_events (
    run_id           TEXT NOT NULL,
    seq              INTEGER NOT NULL,
    kind             TEXT NOT NULL,
    body_json        TEXT NOT NULL,
    at               TEXT NOT NULL,
    notify_pending   INTEGER,
    PRIMARY KEY (run_id, seq)
);
CREATE INDEX run_events_notify ON run_events (notify_pending);
