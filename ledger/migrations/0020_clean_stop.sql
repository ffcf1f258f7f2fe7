-- Gatehouse ledger, version 20: a worker that stops cleanly says so.
-- `stopped_at` is set by a worker as it exits after SIGTERM/SIGINT (its DBOS
-- threads stopped) and cleared by its next heartbeat. A stopped worker is not
-- live for the shim's /workers, /readyz and `gatehouse up`, at once rather than
-- after dead_after_s of silence. The reaper still judges by the heartbeat
-- counter alone: a stopped worker's unfinished stretches are handed over as a
-- dead one's are, unless it comes back first.
ALTER TABLE executors ADD COLUMN stopped_at TEXT;
