"""The HTTP API. Route handlers translate: validate, make one call, map the result.

Bodies are read raw and checked in order — media type, size, JSON, schema,
model — so every bad input gets its own stable code and a 4xx. Responses are
built from the contract models. A lost database answers 503, never 500.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Annotated, Literal

from fastapi import Depends, FastAPI, Header, Path, Query, Request
from fastapi.responses import JSONResponse, Response
from starlette.concurrency import run_in_threadpool

from contracts import (
    EPISODES_CHANNELS,
    SECURITY_EVENTS_CHANNELS,
    ApprovalRequest,
    CallResolution,
    CancelRequest,
    Decision,
    ErrorCode,
    ForkRequest,
    GatehouseError,
    IntentRequest,
    MessageRequest,
    Role,
    RunStatus,
)
from ledger import database_unreachable, opa_runs
from shim._door import Door, DoorMiddleware, Refused
from shim._error_handlers import install_error_handlers
from shim._events import add_event_routes
from shim._explain import explain
from shim._http import known_query, media_type, model_response, read_body
from shim._metrics import add_metrics_route
from shim._opa_runs import (
    ARCHIVE_MEDIA_TYPES,
    ArchiveUpload,
    output_archive,
    read_capped,
    submit_archive,
)
from shim._openapi import install_openapi
from shim._read_routes import add_read_routes
from shim._service import Service
from shim._wait import parse_until
from shim.dashboard import add_dashboard_routes
from shim.settings import ShimSettings
from shim.tokens import Identity, LiveTokens, bearer

__all__ = ["create_app"]

_log = logging.getLogger("gatehouse.shim")

RunId = Annotated[str, Path(pattern=r"^run_[0-9a-f]{32}$")]
Sha256 = Annotated[str, Path(pattern=r"^[0-9a-f]{64}$")]
OpKey = Annotated[str, Path(pattern=r"^[0-9a-f]{64}$")]
IdempotencyKey = Annotated[
    str | None, Header(alias="Idempotency-Key", pattern=r"^[A-Za-z0-9._:-]{1,128}$")
]
# Query parameters of an archive upload to POST /intent.
ArchiveName = Annotated[
    str | None, Query(max_length=255, pattern=r"^[^/\\\x00-\x1f\x7f]+\.opa(\.jar)?$")
]
ArchiveMode = Annotated[Literal["batch", "autonomous", "interactive"] | None, Query()]
QueryId = Annotated[str | None, Query(pattern=r"^[a-z0-9][a-z0-9._:-]{0,63}$")]


def create_app(
    settings: ShimSettings, service_factory: Callable[[ShimSettings], Service] = Service
) -> FastAPI:
    holder: list[Service] = []
    stores: list[LiveTokens] = []

    async def record(refused: Refused, repeats: int) -> None:
        if holder:
            try:
                # A database write: off the event loop, like the routes' own work.
                await run_in_threadpool(
                    svc().record_refusal,
                    refused.exc,
                    refused.who,
                    refused.route,
                    refused.run_id,
                    refused.token_id,
                    address=refused.address,
                    template=refused.template,
                    repeats=repeats,
                )
            except Exception as lost:
                if not database_unreachable(lost):
                    raise
                # The refusal stands; only its record is lost while the database is away.
                _log.warning("could not record a refusal: the database is away")

    def identify(authorization: str | None) -> str | None:
        """The name behind a valid bearer token, else None (the route refuses it later)."""
        if not stores:
            return None
        try:
            who = stores[0].current().identify(bearer(authorization))
        except GatehouseError:  # no token, or not a bearer one
            return None
        return None if who is None else who.name

    door = Door(settings.rate_per_address, settings.rate_per_identity, identify, record)

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        # No tokens, no shim: there is no anonymous mode to fall back to.
        stores.append(LiveTokens.open(settings.tokens_file))
        holder.append(service_factory(settings))
        flusher = asyncio.create_task(door.run())
        try:
            yield
        finally:
            flusher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await flusher
            await door.flush()  # the rate-limited refusals still held
            holder.pop().close()
            stores.clear()

    app = FastAPI(
        title="Gatehouse",
        version="0.1.0",
        lifespan=lifespan,
        dependencies=[Depends(known_query)],
    )
    app.state.door = door
    app.add_middleware(DoorMiddleware, door=door, routes=lambda: app.router.routes)

    def svc() -> Service:
        return holder[0]

    def auth(request: Request, *roles: Role) -> Identity:
        """The caller's identity from its bearer token; it must hold one of ``roles``."""
        who = stores[0].current().check(bearer(request.headers.get("authorization")))
        request.state.identity, request.state.token_id = who.name, who.token_id
        if roles and not who.has(*roles):
            wanted = " or ".join(r.value for r in roles)
            raise GatehouseError(ErrorCode.FORBIDDEN, f"{who.name} is not {wanted}")
        return who

    async def record_refusal(request: Request, exc: GatehouseError) -> None:
        route = request.scope.get("route")
        refused = Refused(
            exc=exc,
            who=getattr(request.state, "identity", None),
            route=f"{request.method} {request.url.path}",
            template=f"{request.method} {getattr(route, 'path', request.url.path)}",
            run_id=request.path_params.get("run_id"),
            address=request.client.host if request.client else "-",
            token_id=getattr(request.state, "token_id", None),
        )
        await record(refused, 1)

    install_error_handlers(app, record_refusal)

    @app.get("/healthz")
    def healthz() -> JSONResponse:
        svc().healthy()
        return JSONResponse({"status": "ok", "database": "ok"})

    # /readyz, /workers, /recipes and /policies: reads with no run behind them.
    add_read_routes(app, svc, auth)
    add_event_routes(app, svc, auth)
    # stores[0] exists only once the app has started: look it up per request
    add_dashboard_routes(app, svc, lambda: stores[0].current(), record_refusal)  # noqa: PLW0108
    add_metrics_route(app, lambda: svc().db, auth)

    @app.post("/intent")
    async def post_intent(
        request: Request,
        *,
        idempotency_key: IdempotencyKey = None,
        name: ArchiveName = None,
        mode: ArchiveMode = None,
        recipe: QueryId = None,
        policy_profile: QueryId = None,
        tool_pool: QueryId = None,
    ) -> JSONResponse:
        who = auth(request, Role.SUBMITTER)
        if media_type(request) in ARCHIVE_MEDIA_TYPES:
            upload = ArchiveUpload(
                name=name or "archive.opa",
                content=await read_capped(request, settings.max_archive_bytes),
                mode=mode,
                recipe=recipe,
                policy_profile=policy_profile or "default",
                tool_pool=tool_pool or "default",
            )
            # Validating an archive is CPU work: off the event loop.
            created, accepted = await run_in_threadpool(
                submit_archive, svc(), settings.opa_trust_dir, upload, idempotency_key, who
            )
            return model_response(accepted, 202 if created else 200)
        if any(q is not None for q in (name, mode, recipe, policy_profile, tool_pool)):
            raise GatehouseError(
                ErrorCode.INVALID_REQUEST,
                "query parameters name, mode, recipe, policy_profile and tool_pool go with an"
                " archive upload; a JSON intent says these in its body",
            )
        body = await read_body(
            request, settings.max_body_bytes, "env.intent_request_v1", IntentRequest
        )
        created, accepted = svc().submit(body, idempotency_key, who)
        return model_response(accepted, 202 if created else 200)

    async def _decide(request: Request, run_id: str, decision: Decision) -> JSONResponse:
        who = auth(request, Role.APPROVER)
        body = await read_body(
            request, settings.max_body_bytes, "env.approval_request_v1", ApprovalRequest
        )
        return model_response(svc().decide(run_id, body, decision, who))

    @app.post("/approve/{run_id}")
    async def approve(request: Request, run_id: RunId) -> JSONResponse:
        return await _decide(request, run_id, Decision.APPROVED)

    @app.post("/reject/{run_id}")
    async def reject(request: Request, run_id: RunId) -> JSONResponse:
        return await _decide(request, run_id, Decision.REJECTED)

    @app.post("/runs/{run_id}/cancel")
    async def cancel(request: Request, run_id: RunId) -> JSONResponse:
        # Its submitter or an operator; the service checks which runs a submitter owns.
        who = auth(request, Role.SUBMITTER, Role.OPERATOR)
        body = await read_body(
            request, settings.max_body_bytes, "env.cancel_request_v1", CancelRequest
        )
        return model_response(await run_in_threadpool(svc().cancel, run_id, body, who))

    @app.post("/runs/{run_id}/messages")
    async def post_message(request: Request, run_id: RunId) -> JSONResponse:
        # Its submitter or an operator: the next turn of an interactive OPA run.
        who = auth(request, Role.SUBMITTER, Role.OPERATOR)
        body = await read_body(
            request, settings.max_body_bytes, "env.run_message_v1", MessageRequest
        )
        accepted = await run_in_threadpool(svc().message, run_id, body, who)
        return model_response(accepted, status=202)

    @app.get("/runs")
    def list_runs(
        request: Request,
        status: RunStatus | None = None,
        limit: Annotated[int, Query(ge=1, le=200)] = 50,
        cursor: Annotated[str | None, Query(max_length=200, pattern=r"^[^\x00]*$")] = None,
    ) -> JSONResponse:
        # Submitters list their own runs; approvers and operators all (the service filters).
        who = auth(request, Role.SUBMITTER, Role.APPROVER, Role.OPERATOR)
        return model_response(svc().runs(status, limit, cursor, who))

    @app.get("/runs/{run_id}")
    def get_run(request: Request, run_id: RunId) -> JSONResponse:
        who = auth(request, Role.SUBMITTER, Role.APPROVER, Role.OPERATOR)
        return model_response(svc().run(run_id, who))

    @app.get("/runs/{run_id}/wait")
    async def wait_run(
        request: Request,
        run_id: RunId,
        until: Annotated[str | None, Query(max_length=400)] = None,
        timeout_s: Annotated[float, Query(gt=0, le=60)] = 25.0,
    ) -> JSONResponse:
        """The run once its status is one of ``until`` (default: a person must act, or
        it is over) or ``timeout_s`` passed; header ``Gatehouse-Wait: reached|timeout``."""
        who = auth(request, Role.SUBMITTER, Role.APPROVER, Role.OPERATOR)
        try:
            wanted = parse_until(until)
        except ValueError as exc:
            raise GatehouseError(ErrorCode.INVALID_REQUEST, str(exc)) from exc
        service = svc()
        view = await run_in_threadpool(service.run, run_id, who)  # exists, and theirs to see
        if view.status not in wanted:

            async def status() -> RunStatus | None:
                return await run_in_threadpool(service.status, run_id)

            await service.watch.wait(run_id, status, wanted, timeout_s)
            view = await run_in_threadpool(service.run, run_id, who)
        answer = model_response(view)
        answer.headers["Gatehouse-Wait"] = "reached" if view.status in wanted else "timeout"
        return answer

    @app.get("/runs/{run_id}/output.opa")
    def get_output_archive(request: Request, run_id: RunId) -> Response:
        who = auth(request, Role.SUBMITTER, Role.APPROVER, Role.OPERATOR)
        content = output_archive(svc(), run_id, who)
        return Response(
            content,
            media_type=opa_runs.MEDIA_TYPE,
            headers={
                "Content-Disposition": f'attachment; filename="{run_id}.output.opa"',
                "X-Content-Type-Options": "nosniff",
            },
        )

    @app.get("/runs/{run_id}/ledger")
    def get_ledger(request: Request, run_id: RunId) -> JSONResponse:
        auth(request, Role.OPERATOR)
        return JSONResponse({"calls": [c.model_dump(mode="json") for c in svc().ledger(run_id)]})

    @app.get("/runs/{run_id}/ledger/verify")
    def verify_ledger(request: Request, run_id: RunId) -> JSONResponse:
        auth(request, Role.OPERATOR)
        return JSONResponse(svc().verify_ledger(run_id))

    @app.post("/runs/{run_id}/replay")
    def replay(
        request: Request,
        run_id: RunId,
        rules: Annotated[Literal["recorded", "current"], Query()] = "recorded",
    ) -> JSONResponse:
        """Replay under the profile and tool pool versions the run ran under, or under
        today's files (``rules=current``: would it still pass?)."""
        # Sync: FastAPI runs it in a worker thread while a worker replays the run.
        auth(request, Role.OPERATOR)
        return model_response(svc().replay(run_id, rules))

    @app.get("/runs/{run_id}/explain")
    def get_explain(request: Request, run_id: RunId) -> JSONResponse:
        # Sync: FastAPI runs it in a worker thread while a worker asks the model.
        who = auth(request, Role.SUBMITTER, Role.APPROVER, Role.OPERATOR)
        return model_response(explain(svc(), run_id, who))

    @app.post("/runs/{run_id}/fork")
    async def fork(request: Request, run_id: RunId) -> JSONResponse:
        who = auth(request, Role.APPROVER)
        body = await read_body(request, settings.max_body_bytes, "env.fork_request_v1", ForkRequest)
        return model_response(await run_in_threadpool(svc().fork, run_id, body, who), 202)

    @app.post("/calls/{op_key}/resolve")
    async def resolve(request: Request, op_key: OpKey) -> JSONResponse:
        who = auth(request, Role.OPERATOR)
        body = await read_body(
            request, settings.max_body_bytes, "env.call_resolution_v1", CallResolution
        )
        return model_response(await run_in_threadpool(svc().resolve, op_key, body, who))

    @app.get("/runs/{run_id}/episodes")
    def get_episodes(request: Request, run_id: RunId) -> JSONResponse:
        auth(request, Role.OPERATOR)
        return JSONResponse(
            {
                "episodes": [e.model_dump(mode="json") for e in svc().episodes(run_id)],
                "text_channels": {k: v.value for k, v in EPISODES_CHANNELS.items()},
            }
        )

    @app.get("/runs/{run_id}/artifacts")
    def get_artifacts(request: Request, run_id: RunId) -> JSONResponse:
        auth(request, Role.OPERATOR)
        return JSONResponse({"artifacts": svc().artifacts(run_id)})

    @app.get("/artifacts/{sha256}")
    def get_artifact(request: Request, sha256: Sha256) -> Response:
        auth(request, Role.OPERATOR)
        media_type, content = svc().artifact(sha256)
        # Artifacts are tool output (channel system_log): served as inert bytes.
        return Response(
            content,
            media_type="application/octet-stream",
            headers={
                "X-Content-Type-Options": "nosniff",
                "X-Gatehouse-Media-Type": media_type,
                "X-Text-Channel": "system_log",
            },
        )

    @app.get("/security-events")
    def get_security_events(
        request: Request, limit: Annotated[int, Query(ge=1, le=1000)] = 100
    ) -> JSONResponse:
        auth(request, Role.OPERATOR)
        return JSONResponse(
            {
                "security_events": svc().security_events(limit),
                "text_channels": {k: v.value for k, v in SECURITY_EVENTS_CHANNELS.items()},
            }
        )

    install_openapi(app)
    return app
