"""Everything DBOS: the workflows, their steps, and DBOS's start and stop.

The rest of the worker knows nothing of the engine: the flow (``worker.flow``)
reaches the world through ports, and this package is what implements them with
DBOS — every port a durable step, a message wait or a durable sleep, but the
planner and tool calls, whose checkpoint is the op_key ledger.

* ``_workflows`` — the workflows and the one explicit list that registers them;
* ``_live`` — ``LivePorts``: the flow's ports as DBOS steps and waits;
* ``_stretch`` — ``StretchPorts``: a split run's stretch, answered from the
  ledger up to the decision it resumes at, live after it;
* ``_records`` — each record of a run (``worker.records``) as its DBOS step;
* ``_calls`` — the planner and tool calls; the explain, replay and OPA-pack steps;
* ``_tx`` — how a record runs: a plain step, or a datasource transaction;
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
