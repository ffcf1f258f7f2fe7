"""Everything DBOS: the workflows, their steps, and DBOS's start and stop.

The rest of the worker knows nothing of the engine: the flow (``worker.flow``)
reaches the world through ports, and this package is what implements them with
DBOS: the queue, the workflows, message waits and durable sleeps. No record or call
is a DBOS step: a record is one transaction of ours holding its checkpoint (``_tx``),
a planner or tool call's checkpoint is its op_key ledger row.

* ``_workflows`` — the workflows and the one explicit list that registers them;
* ``_live`` — ``LivePorts``: the flow's ports, live (ledgered calls, records, waits);
* ``_stretch`` — ``StretchPorts``: a split run's stretch, live from the
  continuation its park wrote, or answered from the ledger up to the wait it
  resumes at and live after it;
* ``_records`` — each record of a run (``worker.records``) under its durable name;
* ``_calls`` — the planner and tool calls; the explain, replay and OPA-pack steps;
* ``_tx`` — how a record runs: one transaction with its checkpoint in it; the
  attempts of work in a workflow's body while the database is away (``steadily``);
* ``_cancel`` — a workflow's own DBOS end, and the sweep of runs cancelled
  through DBOS;
* ``_recovery`` — what the reaper has DBOS do (``UPKEEP``);
* ``_launch`` — DBOS's settings, start and stop;
* ``_wake`` — a worker told of new work at once (PostgreSQL ``LISTEN``);
* ``_expiry`` — waits past their expiry handed to the stretch that ends them;
* ``_dbos`` — the one module that uses DBOS's private API.

Every durable name comes from ``contracts.durable``.
"""

from worker.durable._launch import (
    dbos_config,
    start_dbos,
    stop_dbos,
    wakes_heard,
)
from worker.durable._live import LivePorts
from worker.durable._recovery import UPKEEP
from worker.durable._workflows import (
    WORKFLOWS,
    explain_workflow,
    intent_workflow,
    register,
    replay_workflow,
    stretch_workflow,
)

__all__ = [
    "UPKEEP",
    "WORKFLOWS",
    "LivePorts",
    "dbos_config",
    "explain_workflow",
    "intent_workflow",
    "register",
    "replay_workflow",
    "start_dbos",
    "stop_dbos",
    "stretch_workflow",
    "wakes_heard",
]
