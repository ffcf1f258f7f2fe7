"""Routes with no run behind them: readiness, workers, recipes, policies.

``add_read_routes`` is called by ``shim.app.create_app`` with the app's own
service accessor and auth check, so these routes refuse and record exactly
as the others do.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Protocol

from fastapi import FastAPI, Path, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from starlette.concurrency import run_in_threadpool

from contracts import POLICY_CHANNELS, ErrorCode, GatehouseError, JsonValue, Role
from policies import catalog
from shim._health import readiness, workers
from shim._service import Service
from shim.tokens import Identity

__all__ = ["add_read_routes"]

PolicyId = Annotated[str, Path(pattern=r"^[a-z0-9][a-z0-9._:-]{0,63}$")]


class Auth(Protocol):
    def __call__(self, request: Request, *roles: Role) -> Identity: ...


def _policy(model: BaseModel, digest: str) -> JsonValue:
    """A policy file as served: its content, its SHA-256, and which text is for models."""
    body: JsonValue = {
        "digest": digest,
        "content": model.model_dump(mode="json"),
        # planner_instruction is guardrail text for planners, never text for people.
        "text_channels": {k: v.value for k, v in POLICY_CHANNELS.items()},
    }
    return body


def add_read_routes(app: FastAPI, svc: Callable[[], Service], auth: Auth) -> None:
    @app.get("/readyz")
    async def readyz() -> JSONResponse:
        # Open like /healthz, for probes: it names what is missing, never a secret.
        s = svc()
        ready, report = await run_in_threadpool(
            readiness, s.db, s.settings.app_version, s.settings.dead_after_s
        )
        return JSONResponse(report, status_code=200 if ready else 503)

    @app.get("/workers")
    def get_workers(request: Request) -> JSONResponse:
        auth(request, Role.OPERATOR)
        s = svc()
        return JSONResponse(workers(s.db, s.settings.app_version, s.settings.dead_after_s))

    @app.get("/recipes")
    def get_recipes(request: Request) -> JSONResponse:
        auth(request)
        return JSONResponse(
            {
                "recipes": [
                    {
                        "recipe_id": r.model.recipe_id,
                        "title": r.model.title,
                        "planner": r.model.planner,
                        "parameters_schema": r.model.parameters_schema,
                        "digest": r.digest,
                    }
                    for r in catalog.list_recipes()
                ]
            }
        )

    @app.get("/policies")
    def get_policies(request: Request) -> JSONResponse:
        auth(request, Role.OPERATOR)
        return JSONResponse(
            {
                "profiles": [_policy(p.model, p.digest) for p in catalog.list_profiles()],
                "tool_pools": [_policy(t.model, t.digest) for t in catalog.list_tool_pools()],
            }
        )

    @app.get("/policies/{policy_id}")
    def get_policy(request: Request, policy_id: PolicyId) -> JSONResponse:
        auth(request, Role.OPERATOR)
        profiles = [p for p in catalog.list_profiles() if p.model.profile_id == policy_id]
        pools = [t for t in catalog.list_tool_pools() if t.model.tool_pool_id == policy_id]
        if not profiles and not pools:
            raise GatehouseError(ErrorCode.NOT_FOUND, f"no profile or tool pool {policy_id!r}")
        return JSONResponse(
            {
                "policy_id": policy_id,
                "profile": _policy(profiles[0].model, profiles[0].digest) if profiles else None,
                "tool_pool": _policy(pools[0].model, pools[0].digest) if pools else None,
            }
        )
