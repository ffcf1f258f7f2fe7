"""``/dashboard/oidc/start`` and ``/dashboard/oidc/callback``: signing in with the
company's identity provider (``GATEHOUSE_OIDC``) instead of a bearer token.

Start makes a state, a nonce and a PKCE verifier, keeps them (hashed state) for ten
minutes, puts the state in a cookie of this browser too, and sends the browser to the
provider. The callback takes that sign-in once, only from the browser that started
it (``oidc_state_invalid`` otherwise: a forged, replayed or expired state), exchanges
the code, checks the ID token (``shim.api.idp``) and opens a session whose
cookie names a row of ``dashboard_sessions``: the person's identity and the roles
their groups gave them at sign-in, for ``session_hours``.
"""

from __future__ import annotations

import hmac
import secrets
from typing import Annotated

from fastapi import APIRouter, Query, Request
from fastapi.responses import RedirectResponse, Response
from starlette.concurrency import run_in_threadpool

from contracts import ErrorCode, GatehouseError
from ledger import oidc
from shim.api.dashboard._pages import PageRoute, page
from shim.api.dashboard.session import remember
from shim.api.deps import ServiceDep
from shim.api.idp import IdentityProvider, provider_of
from shim.api.services import sessions

router = APIRouter(route_class=PageRoute)

_STATE_COOKIE = "gatehouse_oidc_state"
_STATE_PATH = "/dashboard/oidc"


def _provider(request: Request) -> IdentityProvider:
    found = provider_of(request.app.state)
    if found is None:
        raise GatehouseError(
            ErrorCode.NOT_FOUND,
            "signing in with an identity provider is not set up (GATEHOUSE_OIDC)",
        )
    return found


def _dashboard_path(next_path: str) -> str:
    return (
        next_path if next_path.startswith("/dashboard") and "//" not in next_path else "/dashboard"
    )


@router.get("/dashboard/oidc/start")
async def oidc_start(
    request: Request,
    service: ServiceDep,
    next: Annotated[str, Query(max_length=500)] = "/dashboard",
) -> Response:
    idp = _provider(request)
    state, nonce, verifier = (secrets.token_urlsafe(32) for _ in range(3))
    target = await idp.authorize_url(state, nonce, verifier)
    login = oidc.Login(nonce, verifier, _dashboard_path(next))

    def keep() -> None:
        with service.db.engine.begin() as conn:
            oidc.start_login(conn, state, login)

    await run_in_threadpool(keep)
    response = RedirectResponse(target, status_code=303)
    response.set_cookie(_STATE_COOKIE, state, max_age=oidc.LOGIN_TTL_S, path=_STATE_PATH,
                        httponly=True, samesite="lax",
                        secure=request.url.scheme == "https")  # fmt: skip
    return response


@router.get("/dashboard/oidc/callback")
async def oidc_callback(
    request: Request,
    service: ServiceDep,
    code: Annotated[str, Query(max_length=4096)] = "",
    state: Annotated[str, Query(max_length=512)] = "",
    error: Annotated[str, Query(max_length=200)] = "",
) -> Response:
    idp = _provider(request)
    mine = request.cookies.get(_STATE_COOKIE, "")
    if not state or not hmac.compare_digest(mine.encode(), state.encode()):
        raise GatehouseError(
            ErrorCode.OIDC_STATE_INVALID, "this sign-in was not started from this browser"
        )

    def take() -> oidc.Login | None:
        with service.db.engine.begin() as conn:
            return oidc.take_login(conn, state)

    login = await run_in_threadpool(take)
    if login is None:
        raise GatehouseError(
            ErrorCode.OIDC_STATE_INVALID,
            "this sign-in was already used, or is older than ten minutes: sign in again",
        )
    if error or not code:
        raise GatehouseError(
            ErrorCode.OIDC_TOKEN_INVALID,
            f"the identity provider did not sign you in ({error or 'no code'})",
            {"reason": error or "no code"},
        )
    person = await idp.sign_in(code, login.verifier, login.nonce)
    request.state.identity = person.identity
    opened = await run_in_threadpool(sessions.open_session, service, person, idp.config)
    # A page of this origin sends the browser on: the session cookie (SameSite=Strict)
    # is not sent on a redirect chain that began at the provider's site.
    response = page("signed_in.html", who=None, next=login.next_path, identity=person.identity,
                    roles=[r.value for r in opened.roles])  # fmt: skip
    remember(response, request, opened.token)
    response.delete_cookie(_STATE_COOKIE, path=_STATE_PATH)
    return response
