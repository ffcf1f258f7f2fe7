"""What each moment of a run writes: the bodies of its database steps.

Each body takes the open transaction, its argument as JSON and the worker's
settings, and answers JSON; ``worker.durable`` runs each as a DBOS step (or a
DBOS datasource transaction, whose rows and checkpoint commit together). A
body run as a plain step may run twice after a crash before its checkpoint,
so it writes nothing new the second time (rows keyed by what they record,
``ON CONFLICT DO NOTHING``, updates to the same value). No DBOS here.

One module per moment of a run: ``_begin``, ``_gate`` (the plan card and its
tamper check), ``_decisions`` (people's decisions, in-doubt resolutions),
``_steps``, ``_messages`` (an interactive run between turns), ``_cancels``
(a cancel seen at a boundary), ``_finish``.
"""

from worker.records._begin import begin
from worker.records._cancels import (
    cancel_episode,
    check_boundary,
    observe_cancel,
    observed_cancel,
)
from worker.records._decisions import (
    SUPERSEDED,
    decision_or_park,
    expire_plan_card,
    needs_operator,
    read_resolution,
    resolution_or_park,
    resume_after_resolution,
    take_decision,
)
from worker.records._finish import FINISH, close_run, finish
from worker.records._gate import gate, plan_check, plan_problem
from worker.records._messages import message_or_park, read_message, took_message, wait_for_input
from worker.records._steps import record_step, step_verdict, write_step

__all__ = [
    "FINISH",
    "SUPERSEDED",
    "begin",
    "cancel_episode",
    "check_boundary",
    "close_run",
    "decision_or_park",
    "expire_plan_card",
    "finish",
    "gate",
    "message_or_park",
    "needs_operator",
    "observe_cancel",
    "observed_cancel",
    "plan_check",
    "plan_problem",
    "read_message",
    "read_resolution",
    "record_step",
    "resolution_or_park",
    "resume_after_resolution",
    "step_verdict",
    "take_decision",
    "took_message",
    "wait_for_input",
    "write_step",
]
