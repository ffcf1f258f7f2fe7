"""``/auth/oidc``: how the CLI signs in with the company's identity provider
(``gatehouse login``), ``/auth/oidc/exchange``: its ID token for a session, and
``/auth/oidc/logout``: that session ended (``gatehouse logout``).

The first two are open (no bearer token): the first says only where to sign in; the
second takes an ID token the provider signed for the CLI's client (``cli_client_id``),
issued within five minutes, and answers a session token for the person it names,
with the roles their groups give (``shim.api.idp``). An ID token is exchanged once:
a second exchange of it is ``oidc_token_replayed``, recorded as a security event like
every refusal. ``not_found`` without the OIDC file, or when it names no CLI client.
Logout takes the session token as its bearer token and deletes the session's row:
the token is refused from then on.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Request
from starlette.concurrency import run_in_threadpool

from contracts import ErrorCode, GatehouseError, OidcExchange, OidcSession
from shim.api.deps import ServiceDep, SessionTokenDep, require
from shim.api.http import Answer, model_response, read_body
from shim.api.idp import IdentityProvider, Person, provider_of
from shim.api.openapi import BODY, OBJECT, Op, Schema, documented
from shim.api.services import sessions
from shim.tokens import Identity

_ENDED: Schema = {"type": "object", "required": ["ended", "identity"], "properties": {
    "ended": {"type": "boolean"}, "identity": {"type": "string"}}}  # fmt: skip

router = APIRouter()


def _provider(request: Request) -> IdentityProvider:
    found = provider_of(request.app.state)
    if found is None or found.config.cli_client_id is None:
        raise GatehouseError(
            ErrorCode.NOT_FOUND, "the CLI cannot sign in with an identity provider here"
        )
    return found


@router.get("/auth/oidc", openapi_extra=documented(Op(answer=OBJECT, public=True, errors=(404,))))
async def oidc_for_the_cli(request: Request) -> Answer:
    idp = _provider(request)
    meta = await idp.metadata()
    return Answer({
        "issuer": idp.config.issuer, "client_id": idp.config.cli_client_id,
        "scopes": idp.config.scopes,
        "device_authorization_endpoint": meta.get("device_authorization_endpoint"),
        "token_endpoint": meta.get("token_endpoint"),
    })  # fmt: skip


@router.post(
    "/auth/oidc/exchange",
    openapi_extra=documented(
        Op(answer=OidcSession, body=OidcExchange, public=True, errors=(401, 403, 404, *BODY))
    ),
)
async def exchange(request: Request, service: ServiceDep) -> Answer:
    idp = _provider(request)
    body = await read_body(
        request, service.settings.max_body_bytes, "env.oidc_exchange_v1", OidcExchange
    )
    person: Person = await idp.cli_person(body.id_token)
    request.state.identity = person.identity
    opened: OidcSession = await run_in_threadpool(
        sessions.open_session, service, person, idp.config
    )
    return model_response(opened)


@router.post("/auth/oidc/logout", openapi_extra=documented(Op(answer=_ENDED, errors=(422,))))
async def logout(
    caller: Annotated[Identity, Depends(require())], token: SessionTokenDep, service: ServiceDep
) -> Answer:
    await run_in_threadpool(sessions.end_session, service, token)
    return Answer({"ended": True, "identity": caller.name})
