-- Gatehouse ledger, version 30: where a parked run goes on, as data.
-- runs.continuation_json: written with the park at a decision wait, what the next
-- stretch needs to start right at that decision (the plan and its digest, the next
-- step, outputs and the step summary so far, the budget account, the trace so far,
-- the seed; contracts.Continuation, env.continuation_v1). Read by whoever hands the
-- run off, into the next stretch's job; cleared once the wait is answered. NULL: the
-- run is parked at another kind of wait (an input, a call in doubt), or was parked
-- before version 30: its next stretch runs the flow from its start, answered from
-- the ledger up to the wait, as before.
ALTER TABLE runs ADD COLUMN continuation_json TEXT;
