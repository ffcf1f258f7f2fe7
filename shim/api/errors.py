"""How the shim answers errors: each one as the error envelope with its stable code.

A ``GatehouseError`` is answered as it is (and recorded as a refusal); FastAPI's
own validation and routing errors become ``invalid_request``, ``not_found`` or
``method_not_allowed``; a full disk is 507 ``storage_full`` and a lost database,
however it is wrapped, 503 ``database_unavailable``; anything else is a 500
``internal_error`` whose body names only the exception's type.

A refusal's record (``record_refused``) names who was refused what, where; it
is written off the event loop, and while the database is away the refusal
stands unrecorded.
"""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from sqlalchemy.exc import OperationalError
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match

from contracts import ErrorCode, GatehouseError
from ledger import database_unreachable, no_space, storage_full
from shim.api.door import Door, Record, Refused
from shim.api.http import Answer, error_response, problems, said, served_routes
from shim.api.services import Service
from shim.api.services.refusals import record_refusal

__all__ = ["install_error_handlers", "record_refused", "refusal_recorder"]

_log = logging.getLogger("gatehouse.shim")


def _database_lost() -> Answer:
    return error_response(
        GatehouseError(ErrorCode.DATABASE_UNAVAILABLE, "the database cannot be reached")
    )


def _disk_full(exc: Exception) -> Answer:
    # Before the database-lost check: SQLite's "disk is full" is an OperationalError too,
    # but waiting for the database will not help; freeing space will.
    _log.warning("storage full: %s", str(exc).strip().splitlines()[0][:200] if str(exc) else "")
    return error_response(no_space("the request could not be stored", exc))


def refusal_recorder(app: FastAPI) -> Record:
    """How refusals are written while ``app`` runs (the door holds it: ``app.state.door``)."""

    async def record(refused: Refused, repeats: int) -> None:
        service = getattr(app.state, "service", None)
        if not isinstance(service, Service):
            return  # not started, or stopped: nothing to write to
        try:
            # A database write: off the event loop, like the routes' own work.
            await run_in_threadpool(
                record_refusal,
                service,
                refused.exc,
                refused.who,
                refused.route,
                run_id=refused.run_id,
                token_id=refused.token_id,
                address=refused.address,
                template=refused.template,
                repeats=repeats,
            )
        except Exception as lost:
            if not database_unreachable(lost):
                raise
            # The refusal stands; only its record is lost while the database is away.
            _log.warning("could not record a refusal: the database is away")

    return record


async def record_refused(request: Request, exc: GatehouseError) -> None:
    """Record that this request was refused with ``exc``: who, what, from where."""
    door = getattr(request.app.state, "door", None)
    if not isinstance(door, Door):
        return
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
    await door.record(refused, 1)


def _allowed(request: Request) -> str:
    """Every method the request's path takes (Allow, RFC 9110 §10.2.1). Starlette's 405
    names those of the first route on the path only, and a path can have several: the
    probes' HEAD is a route of its own, left out of the OpenAPI document."""
    methods: set[str] = set()
    for route in served_routes(request.app):
        if route.matches(request.scope)[0] is not Match.NONE:
            methods.update(getattr(route, "methods", None) or ())
    return ", ".join(sorted(methods))


def install_error_handlers(app: FastAPI) -> None:
    """Every error becomes the error envelope with its stable code: a refusal is
    recorded first; a full disk is 507, a lost database 503, anything else 500."""

    @app.exception_handler(GatehouseError)
    async def _gatehouse_error(request: Request, exc: GatehouseError) -> Answer:
        await record_refused(request, exc)
        return error_response(exc)

    @app.exception_handler(RequestValidationError)
    async def _validation_error(_r: Request, exc: RequestValidationError) -> Answer:
        details = problems(exc)
        return error_response(
            GatehouseError(
                ErrorCode.INVALID_REQUEST, f"a parameter is invalid: {said(details)}", details
            )
        )

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException) -> Answer:
        code = {404: ErrorCode.NOT_FOUND, 405: ErrorCode.METHOD_NOT_ALLOWED}.get(
            exc.status_code, ErrorCode.INVALID_REQUEST
        )
        answer = error_response(GatehouseError(code, str(exc.detail)))
        answer.headers.update(exc.headers or {})
        if exc.status_code == 405:
            answer.headers["Allow"] = _allowed(request)
        return answer

    @app.exception_handler(OperationalError)
    async def _db_down(_r: Request, exc: OperationalError) -> Answer:
        if storage_full(exc):
            return _disk_full(exc)
        _log.warning("database unavailable: %s", exc.__class__.__name__)
        return _database_lost()

    @app.exception_handler(Exception)
    async def _unexpected(_r: Request, exc: Exception) -> Answer:
        if storage_full(exc):
            return _disk_full(exc)
        # The database lost, however wrapped (DBAPIError, psycopg's own, DBOS's client)
        if database_unreachable(exc):
            _log.warning("database unavailable: %s", exc.__class__.__name__)
            return _database_lost()
        _log.exception("unexpected error")
        return error_response(GatehouseError(ErrorCode.INTERNAL_ERROR, type(exc).__name__))
