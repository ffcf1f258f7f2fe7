"""The API's routes, one router module per resource.

A handler takes the caller (``require``) and the service (``ServiceDep``) as
dependencies, reads the body, makes one service call (``shim.api.services``)
and maps the result. A new route is a router module here (listed in
``ROUTERS``) and a service module there.
"""

from __future__ import annotations

from fastapi import APIRouter

from shim.api.routes import (
    artifacts,
    auth,
    calls,
    cancels,
    catalog,
    decisions,
    edits,
    episodes,
    events,
    explain,
    forks,
    health,
    intents,
    ledger,
    messages,
    metrics,
    opa,
    replays,
    runs,
    security_events,
    workers,
)

__all__ = ["ROUTERS"]

# The order the OpenAPI document lists the paths in.
ROUTERS: tuple[APIRouter, ...] = (
    health.router,
    auth.router,
    workers.router,
    catalog.router,
    events.router,
    metrics.router,
    intents.router,
    decisions.router,
    edits.router,
    cancels.router,
    messages.router,
    runs.router,
    opa.router,
    ledger.router,
    replays.router,
    explain.router,
    forks.router,
    calls.router,
    episodes.router,
    artifacts.router,
    security_events.router,
)
