-- Gatehouse ledger, version 10: follow-up messages to interactive OPA runs.
-- One row per turn of a run's session, numbered from 1 in the order the shim
-- accepted them (under the run's row lock). ends = 1 closes the session. The
-- row is the authority; the message sent to the workflow only wakes it.

CREATE TABLE run_messages (
    run_id           TEXT NOT NULL REFERENCES runs (run_id),
    turn             INTEGER NOT NULL,
    text             TEXT,
    ends             INTEGER NOT NULL,
    sent_by          TEXT NOT NULL,
    sent_at          TEXT NOT NULL,
    PRIMARY KEY (run_id, turn)
);
