"""Database steps of the intent workflow (``_tx``: how each is run).

Most are a DBOS step around one transaction whose writes are idempotent, so
a crash before the checkpoint runs it again to the same rows; the gate and
the plan check are DBOS datasource transactions, their rows and the
checkpoint in one commit. One module per moment of a run: ``begin``,
``gate`` (and the plan card and its tamper check), ``approval`` (people's
decisions, in-doubt resolutions), ``steps``, ``messages`` (an interactive run
between turns), ``finish``.
"""

from worker.records.approval import (
    expire_plan_card,
    needs_operator,
    read_decision,
    read_resolution,
    record_decision,
    resume_after_resolution,
    take_decision,
)
from worker.records.begin import begin_run
from worker.records.finish import finish_run
from worker.records.gate import gate_and_card, plan_problem, verify_plan
from worker.records.messages import read_message, took_message, wait_for_input
from worker.records.steps import record_step_result, step_verdict

__all__ = [
    "begin_run",
    "expire_plan_card",
    "finish_run",
    "gate_and_card",
    "needs_operator",
    "plan_problem",
    "read_decision",
    "read_message",
    "read_resolution",
    "record_decision",
    "record_step_result",
    "resume_after_resolution",
    "step_verdict",
    "take_decision",
    "took_message",
    "verify_plan",
    "wait_for_input",
]
