"""The live dashboard, ``/dashboard``: server-rendered pages over the same services as the API.

One router module per page; ``_pages.py`` holds what they share (rendering,
the viewer, errors shown as pages) and ``session.py`` the session cookie and form tokens.

    assets.py       the script and the style sheet (the files are in static/)
    login.py        logging in and out
    oidc.py         signing in with the identity provider (GATEHOUSE_OIDC)
    runs.py         the runs
    approvals.py    the runs waiting for a decision
    security.py     the security events
    workers.py      the workers
    run.py          one run, live
    run_actions.py  a run's forms: approve, reject, cancel, replay, verify
    artifacts.py    an artifact's bytes
"""

from __future__ import annotations

from fastapi import APIRouter

from shim.api.dashboard import (
    approvals,
    artifacts,
    assets,
    login,
    oidc,
    run,
    run_actions,
    runs,
    security,
    workers,
)
from shim.api.dashboard._pages import label, page

__all__ = ["ROUTERS", "label", "page"]

ROUTERS: tuple[APIRouter, ...] = (
    assets.router,
    login.router,
    oidc.router,
    runs.router,
    approvals.router,
    security.router,
    workers.router,
    run.router,
    run_actions.router,
    artifacts.router,
)
