"""``create_app``: the HTTP API composed — routers, the edge, the door, error handlers,
OpenAPI.

It registers no route itself (``shim.api.routes``, ``shim.api.dashboard`` and
``shim.api.slack`` do) and holds no state but what its lifespan opens: the
tokens file, followed live (no tokens, no shim: there is no anonymous mode to
fall back to), the Slack file when there is one, and the ``Service`` the routes
share (``app.state``), closed when the app stops.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

from fastapi import Depends, FastAPI
from starlette.types import ASGIApp

from contracts import GatehouseError
from policies import catalog
from shim.api import dashboard, routes, slack
from shim.api.deps import names_of
from shim.api.door import Door, DoorMiddleware
from shim.api.edge import EdgeMiddleware
from shim.api.errors import install_error_handlers, refusal_recorder
from shim.api.http import Answer, known_query, served_routes
from shim.api.idp import open_oidc
from shim.api.openapi import install_openapi
from shim.api.services import Service
from shim.settings import Proxies, ShimSettings
from shim.tokens import LiveTokens

__all__ = ["create_app"]


class _App(FastAPI):
    """FastAPI with the edge (``shim.api.edge``) outside all of its middleware: those
    added with ``add_middleware`` sit inside Starlette's error middleware, whose 500
    would pass them by."""

    trusted_proxies: Proxies = ()

    def build_middleware_stack(self) -> ASGIApp:
        return EdgeMiddleware(super().build_middleware_stack(), self.trusted_proxies)


def create_app(
    settings: ShimSettings, service_factory: Callable[[ShimSettings], Service] = Service
) -> FastAPI:
    # Every policy file, and the Cedar policy sets with them, is read and validated
    # now: a broken one stops the shim at its start, not at its first intent.
    catalog.list_profiles()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        tokens = LiveTokens.open(settings.tokens_file)
        try:
            slack_door = slack.open_slack(settings.slack_file)
            idp = open_oidc(settings.oidc_file)
        except GatehouseError as exc:  # as a missing tokens file: no shim
            raise RuntimeError(exc.message) from exc
        service = service_factory(settings)
        # A lifespan started while another runs (a second test client on one app) leaves
        # the first one's tokens and service serving, and in place when it ends.
        first = getattr(app.state, "service", None) is None
        if first:
            app.state.tokens, app.state.service = tokens, service
            app.state.slack, app.state.oidc = slack_door, idp
        stopping = asyncio.Event()
        flusher = asyncio.create_task(door.run(stopping))
        try:
            yield
        finally:
            stopping.set()
            await flusher  # its write in flight, then the rate-limited refusals still held
            service.close()
            if first:
                app.state.tokens = app.state.service = None
                app.state.slack = app.state.oidc = None

    app = _App(
        title="Gatehouse",
        version="0.1.0",
        lifespan=lifespan,
        dependencies=[Depends(known_query)],
        default_response_class=Answer,
    )
    app.trusted_proxies = settings.trusted_proxies
    door = Door(
        settings.rate_per_address, settings.rate_per_identity, names_of(app), refusal_recorder(app)
    )
    app.state.door = door
    app.add_middleware(DoorMiddleware, door=door, routes=lambda: served_routes(app))
    install_error_handlers(app)
    for router in (*routes.ROUTERS, *dashboard.ROUTERS, *slack.ROUTERS):
        app.include_router(router)
    install_openapi(app)
    return app
