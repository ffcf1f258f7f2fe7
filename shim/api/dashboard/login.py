"""``/dashboard/login`` and ``/dashboard/logout``: a bearer token in, a session cookie out.

Logging in is giving the shim a bearer token, the same token the API takes;
it is checked against the tokens, then kept in the session cookie (``session``).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Form, Query, Request
from fastapi.responses import RedirectResponse, Response
from starlette.concurrency import run_in_threadpool

from contracts import ErrorCode, GatehouseError
from ledger import oidc
from shim.api.dashboard._pages import PageRoute, checked_form, page, viewer
from shim.api.dashboard.session import OIDC_PREFIX, forget, remember, same_origin, session_token
from shim.api.deps import ServiceDep, TokensDep
from shim.api.errors import record_refused
from shim.api.idp import provider_of
from shim.tokens import Identity

router = APIRouter(route_class=PageRoute)

_LOGIN_PROBLEMS = {
    ErrorCode.TOKEN_EXPIRED: "That token has expired.",
    ErrorCode.TOKEN_REVOKED: "That token was revoked.",
}


def _issuer(request: Request) -> str | None:
    """The identity provider the login page offers, if the shim has one."""
    idp = provider_of(request.app.state)
    return None if idp is None else idp.config.issuer


def _login_refused() -> GatehouseError:
    return GatehouseError(ErrorCode.UNAUTHORIZED, "dashboard login refused")


@router.get("/dashboard/login")
def login_page(
    request: Request, next: Annotated[str, Query(max_length=500)] = "/dashboard"
) -> Response:
    return page("login.html", who=None, next=next, problem=None, issuer=_issuer(request))


@router.post("/dashboard/login")
async def login(
    request: Request,
    tokens: TokensDep,
    token: Annotated[str, Form(max_length=500)],
    next: Annotated[str, Form(max_length=500)] = "/dashboard",
) -> Response:
    refused = None if same_origin(request) else _login_refused()
    try:
        tokens.check(token.strip())
    except GatehouseError as exc:
        # An expired or revoked token is named as such (and by its id in the record).
        refused = exc if exc.code in _LOGIN_PROBLEMS else _login_refused()
    if refused is not None:
        await record_refused(request, refused)
        problem = _LOGIN_PROBLEMS.get(refused.code, "That token is not valid.")
        return page("login.html", http_status=401, who=None, next=next, problem=problem,
                    issuer=_issuer(request))  # fmt: skip
    # only somewhere on this dashboard: never an open redirect
    target = next if next.startswith("/dashboard") and "//" not in next else "/dashboard"
    response = RedirectResponse(target, status_code=303)
    remember(response, request, token.strip())
    return response


@router.post("/dashboard/logout")
async def logout(
    request: Request, me: Annotated[Identity, Depends(viewer())], service: ServiceDep
) -> Response:
    await checked_form(request)
    token = session_token(request) or ""
    if token.startswith(OIDC_PREFIX):  # the session's row goes: the cookie is worth nothing

        def end() -> None:
            with service.db.engine.begin() as conn:
                oidc.end_session(conn, token.removeprefix(OIDC_PREFIX))

        await run_in_threadpool(end)
    response = RedirectResponse("/dashboard/login", status_code=303)
    forget(response)
    return response
