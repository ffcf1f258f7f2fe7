"""Every durable name Gatehouse gives DBOS: its queue, workflows, steps and topics.

NEVER RENAME ONE. DBOS records these names with every workflow in its system
tables: a workflow in flight when a new release starts is found again by its
name, and replayed by matching each recorded step's name with the step the
code calls at that point. A renamed workflow or step strands every run that
was in flight under the old name. A new name may be added; an old one stays
as long as any database may hold a run that used it.

The shim enqueues workflows and sends to topics by these names; the worker
registers and calls them (``worker/durable``). No other module writes one as
a literal (``tests/static/test_durable_names.py``).
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "APPROVAL_TOPIC",
    "DURABLE_NAMES",
    "EXPLAIN_WORKFLOW",
    "INTENT_QUEUE",
    "INTENT_WORKFLOW",
    "LEGACY_PARTITION",
    "REPLAY_WORKFLOW",
    "RESOLUTION_TOPIC",
    "STRETCH_WORKFLOW",
    "Step",
    "queue_partition",
]

# The queue every workflow is enqueued on. It is partitioned by whom the work is
# for (``queue_partition``): DBOS claims partition by partition in a random
# order, and a worker runs at most its share (``GATEHOUSE_WORKER_SHARE``) of one
# partition's workflows at once, so one submitter's backlog cannot hold every
# slot while another's run waits.
INTENT_QUEUE: Final = "intentQ"
# The partition of work queued before the queue was partitioned (DBOS never
# claims a workflow without one from a partitioned queue; workers give these it).
LEGACY_PARTITION: Final = "(before partitions)"


def queue_partition(identity: str) -> str:
    """The queue partition of work done for ``identity``: a run's submitter (all of
    its stretches), or whoever asked for a fork, a replay or an explain."""
    return identity


# Workflows.
INTENT_WORKFLOW: Final = "gatehouse.intent"  # one run: compile → … → evidence
REPLAY_WORKFLOW: Final = "gatehouse.replay"  # a finished run served from its ledger
EXPLAIN_WORKFLOW: Final = "gatehouse.explain"  # a model's report on a finished run
# A run's stretch after a decision (stretch 0 is the intent workflow itself).
STRETCH_WORKFLOW: Final = "gatehouse.stretch"

# Topics a running workflow receives on (the row is the authority; a message wakes).
APPROVAL_TOPIC: Final = "gatehouse.approval"  # a decision, a message or a cancel
RESOLUTION_TOPIC: Final = "gatehouse.resolution"  # an operator's word on a call in doubt


class Step:
    """The steps' durable names. Up to gatehouse-5 each was a DBOS step in its workflow's
    history; since gatehouse-6 a record is Gatehouse's own transaction, which opens a span
    under its name (``worker.durable._tx``), a call is the ledger's (PLANNER_CALL and
    TOOL_CALL name nothing new) and a stretch's job is read (STRETCH_JOB likewise); the
    DBOS steps left are OPA_PACK, EXPLAIN_CALL and REPLAY_RUN."""

    BEGIN: Final = "gatehouse.begin"
    PLANNER_CALL: Final = "gatehouse.planner_call"
    GATE: Final = "gatehouse.gate"  # a datasource transaction
    TAKE_DECISION: Final = "gatehouse.take_decision"
    EXPIRE_PLAN_CARD: Final = "gatehouse.expire_plan_card"
    VERIFY_PLAN: Final = "gatehouse.verify_plan"  # a datasource transaction
    TOOL_CALL: Final = "gatehouse.tool_call"
    RECORD_STEP: Final = "gatehouse.record_step"
    NEEDS_OPERATOR: Final = "gatehouse.needs_operator"
    READ_RESOLUTION: Final = "gatehouse.read_resolution"
    RESUME: Final = "gatehouse.resume"
    WAIT_FOR_INPUT: Final = "gatehouse.wait_for_input"
    READ_MESSAGE: Final = "gatehouse.read_message"
    TOOK_MESSAGE: Final = "gatehouse.took_message"
    # A split run's waits: the decision taken, or the run parked (datasource transactions).
    DECISION_OR_PARK: Final = "gatehouse.decision_or_park"
    MESSAGE_OR_PARK: Final = "gatehouse.message_or_park"
    RESOLUTION_OR_PARK: Final = "gatehouse.resolution_or_park"
    STRETCH_JOB: Final = "gatehouse.stretch_job"
    CANCEL_CHECK: Final = "gatehouse.cancel_check"
    OPA_PACK: Final = "gatehouse.opa_pack"
    FINISH: Final = "gatehouse.finish"
    REPLAY_RUN: Final = "gatehouse.replay_run"
    EXPLAIN_CALL: Final = "gatehouse.explain_call"


DURABLE_NAMES: Final = frozenset(
    {
        INTENT_QUEUE,
        INTENT_WORKFLOW,
        REPLAY_WORKFLOW,
        EXPLAIN_WORKFLOW,
        STRETCH_WORKFLOW,
        APPROVAL_TOPIC,
        RESOLUTION_TOPIC,
        *(v for k, v in vars(Step).items() if k.isupper()),
    }
)
