-- Gatehouse ledger, version 8: run budgets.
-- runs.budgets_json: the run's effective budgets and what it has spent of them
-- (contracts BudgetsView: limits, used, exceeded), rewritten at the plan card,
-- after every step and when the run ends. The ledger's calls are the source of
-- truth; this is the display copy.

ALTER TABLE runs ADD COLUMN budgets_json TEXT;
