-- Gatehouse ledger, version 19: every field an auditor relies on is sealed.
-- Before this version a chained call's entry_hash covered its identity, status
-- and body digests, but not its times or who resolved it; a decision was not
-- covered by anything. Now:
--   calls.sealed_json     a copy of the entry's sealed fields (the ten the
--                         hash always covered, plus started_at, finished_at,
--                         duration_ms, resolved_by, resolved_at), taken when
--                         it is chained; ``ledger verify`` names a column that
--                         no longer matches it
--   calls.chain_version   2: entry_hash = sha256 of [prev_hash, 2, the sealed
--                         copy]; NULL: chained before this version, its hash is
--                         over the ten fields (it is left as it is: checkpoints
--                         outside the database hold those hashes)
--   plan_approvals.sealed_json / sealed_hash  the same for a decision (who,
--                         which digest, what, when, the comment); sealed_hash
--                         is sha256 of ["decision", the copy]
-- Rows written before this version get their copy here (with no new hash):
-- an edit to one of their columns from now on is named too.
ALTER TABLE calls ADD COLUMN sealed_json TEXT;
ALTER TABLE calls ADD COLUMN chain_version INTEGER;
ALTER TABLE plan_approvals ADD COLUMN sealed_json TEXT;
ALTER TABLE plan_approvals ADD COLUMN sealed_hash TEXT;
UPDATE calls SET sealed_json = {{JSON_OBJECT('op_key', op_key, 'run_id', run_id, 'step_id', step_id, 'attempt', attempt, 'kind', kind, 'target', target, 'status', status, 'request_digest', request_digest, 'response_digest', response_digest, 'error_code', error_code, 'started_at', started_at, 'finished_at', finished_at, 'duration_ms', duration_ms, 'resolved_by', resolved_by, 'resolved_at', resolved_at)}} WHERE chain_seq IS NOT NULL;
UPDATE plan_approvals SET sealed_json = {{JSON_OBJECT('approval_id', approval_id, 'run_id', run_id, 'plan_digest', plan_digest, 'decision', decision, 'decided_by', decided_by, 'comment', comment, 'decided_at', decided_at)}};
