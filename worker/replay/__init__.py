"""Replay: a finished run's flow run again with every call served from its ledger.

* ``_run`` — ``replay_run`` (the report: match, digests, divergences) and
  ``trace_so_far`` (the digest an unfinished run's records reach);
* ``_ports`` — ``ReplayPorts``: the flow's ports, read-only, answered from the
  database; a missing entry or another request is a divergence.

Nothing is sent and nothing is written. The ``gatehouse.replay`` workflow that
lets the shim ask for one is in ``worker.durable``.
"""

from worker.replay._ports import DivergedError, ReplayPorts, ReplayRules
from worker.replay._run import lineage_chain, recorded_job, replay_run, trace_so_far

__all__ = [
    "DivergedError",
    "ReplayPorts",
    "ReplayRules",
    "lineage_chain",
    "recorded_job",
    "replay_run",
    "trace_so_far",
]
