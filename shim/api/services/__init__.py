"""What the shim does, one module per feature; the routes and the dashboard call them.

Every function takes the ``Service`` (the database, the DBOS client, the run
watch, the settings) first and the caller's ``Identity`` where who asks
matters. A refusal is raised as a ``GatehouseError`` with its stable code.

    core.py       Service: opened once per app, closed when it stops
    submit.py     taking an intent: checks, then rows and queue entry in one transaction
    opa_runs.py   an OPA archive as an intent; a run's output archive
    decide.py     a decision on a run's plan (approve, reject)
    edits.py      an approver's edit of a waiting plan: rejected, and a new run of the edit
    cancel.py     cancelling a run
    messages.py   the next turn of an interactive run
    operators.py  an in-doubt call resolved, a run replayed, a run forked
    explain.py    a worker's explain report on a finished run
    wait.py       waiting on a run's status (watch.py: the wake-ups)
    events.py     a run's event stream
    reads.py      runs and their ledger, episodes, artifacts; security events
    catalog.py    recipes, policy profiles and tool pools as served
    health.py     liveness, readiness, the workers' heartbeats
    metrics.py    Prometheus text from the database
    refusals.py   every refused request as a security event
    sessions.py   a session the identity provider's sign-in opens
    acting.py     what several share: a run's links, acting as the token's identity
"""

from shim.api.services.core import Service

__all__ = ["Service"]
