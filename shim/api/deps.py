"""What a handler takes besides its parameters: the caller and the service.

A handler declares them (FastAPI's full-stack template): the caller as
``caller: Annotated[Identity, Depends(require(Role.APPROVER))]``, the service
as ``service: ServiceDep``. The caller is known from its bearer token and
noted on the request (a refusal's record names it) before its roles are judged.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated

from fastapi import Depends, FastAPI, Request
from starlette.concurrency import run_in_threadpool

from contracts import ErrorCode, GatehouseError, Role
from ledger import Database
from shim.api.http import refuse_bad_parameters
from shim.api.idp import OIDC_PREFIX, oidc_identity
from shim.api.services import Service
from shim.tokens import Identity, LiveTokens, TokenStore, bearer

__all__ = [
    "ServiceDep",
    "SessionTokenDep",
    "TokensDep",
    "admit",
    "identity_of",
    "names_of",
    "require",
]


async def _service(request: Request) -> Service:
    service = getattr(request.app.state, "service", None)
    if not isinstance(service, Service):
        raise _not_serving()
    return service


def _not_serving() -> GatehouseError:
    """A request that reaches the app outside its lifespan: before it has started, or
    while it stops (a restart's in-flight long poll). Retryable, so a client's wait
    rides it out as it does a shim that is away."""
    return GatehouseError(
        ErrorCode.SHIM_UNAVAILABLE, "the shim is starting or stopping; send it again shortly"
    )


async def _tokens(request: Request) -> TokenStore:
    """The tokens this request is judged by: the tokens file's latest good version."""
    live = getattr(request.app.state, "tokens", None)
    if not isinstance(live, LiveTokens):
        raise _not_serving()
    return live.current()


ServiceDep = Annotated[Service, Depends(_service)]
TokensDep = Annotated[TokenStore, Depends(_tokens)]


def admit(request: Request, who: Identity, roles: tuple[Role, ...]) -> Identity:
    """Note who asks on the request, then refuse them unless they hold one of ``roles``."""
    request.state.identity, request.state.token_id = who.name, who.token_id
    if roles and not who.has(*roles):
        wanted = " or ".join(r.value for r in roles)
        raise GatehouseError(ErrorCode.FORBIDDEN, f"{who.name} is not {wanted}")
    return who


async def identity_of(token: str, tokens: TokenStore, db: Database) -> Identity:
    """Who ``token`` stands for, on the API and the dashboard alike: a token of the
    tokens file (refused as ``TokenStore.check`` refuses), or a session the identity
    provider's sign-in opened (``oidc.…``; ``unauthorized`` once it has ended)."""
    if not token.startswith(OIDC_PREFIX):
        return tokens.check(token)
    person = await run_in_threadpool(oidc_identity, db, token)
    if person is None:
        raise GatehouseError(ErrorCode.UNAUTHORIZED, "the session has ended: sign in again")
    return person


def require(*roles: Role) -> Callable[[Request, TokenStore, Service], Awaitable[Identity]]:
    """The caller's identity from its bearer token; it must hold one of ``roles`` (none
    given: any valid token). A route's malformed parameters are answered first."""

    async def caller(request: Request, tokens: TokensDep, service: ServiceDep) -> Identity:
        refuse_bad_parameters(request)
        token = bearer(request.headers.get("authorization"))
        return admit(request, await identity_of(token, tokens, service.db), roles)

    return caller


async def _session_token(request: Request) -> str:
    """The bearer token of a route that ends the caller's own session (after ``require``
    admitted it): a session the identity provider's sign-in opened, never a token of
    the tokens file (those are revoked in the file)."""
    token = bearer(request.headers.get("authorization"))
    if not token.startswith(OIDC_PREFIX):
        raise GatehouseError(
            ErrorCode.INVALID_REQUEST,
            "this bearer token is not a session from signing in (gatehouse login gives"
            " oidc.…); a token of the tokens file ends with `gatehouse tokens revoke`",
        )
    return token


SessionTokenDep = Annotated[str, Depends(_session_token)]


def names_of(app: FastAPI) -> Callable[[str | None], str | None]:
    """For the door, before any route: the name behind an Authorization header's valid
    bearer token, else None (the route refuses it later)."""

    def name(authorization: str | None) -> str | None:
        live = getattr(app.state, "tokens", None)
        if not isinstance(live, LiveTokens):
            return None
        try:
            who = live.current().identify(bearer(authorization))
        except GatehouseError:  # no token, or not a bearer one
            return None
        return None if who is None else who.name

    return name
