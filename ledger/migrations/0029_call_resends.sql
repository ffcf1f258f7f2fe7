-- Gatehouse ledger, version 29: each time a call was sent again under its key.
-- calls.resends_json: a JSON list, one object per re-send of the entry's op_key after
-- its claim was interrupted (a worker stopped between the claim and the completion):
-- when it was sent again ("at"), why, and by which worker. NULL: sent once, at its
-- claim. A callee that de-duplicates on the key (Idempotency-Key) heard the call at
-- most 1 + that many times, and acted on it once.
ALTER TABLE calls ADD COLUMN resends_json TEXT;
