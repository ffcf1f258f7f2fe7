"""Sessions the identity provider's sign-in opens: a random token, shown once, whose
digest names a row of ``dashboard_sessions`` (the person and their roles then), until
it expires or is ended (``gatehouse logout``, the dashboard's sign-out)."""

from __future__ import annotations

import secrets

from contracts import ErrorCode, GatehouseError, OidcConfig, OidcSession
from ledger import oidc
from shim.api.idp import OIDC_PREFIX, Person
from shim.api.services.core import Service

__all__ = ["end_session", "open_session"]


def open_session(service: Service, person: Person, config: OidcConfig) -> OidcSession:
    token = secrets.token_urlsafe(32)
    roles = sorted(person.roles)
    with service.db.engine.begin() as conn:
        oidc.start_session(
            conn, token, oidc.Session(person.identity, [r.value for r in roles]),
            issuer=config.issuer, hours=config.session_hours,
        )  # fmt: skip
    return OidcSession(
        token=OIDC_PREFIX + token,
        identity=person.identity,
        roles=roles,
        expires_in_s=int(config.session_hours * 3600),
    )


def end_session(service: Service, token: str) -> None:
    """End the session ``token`` (``oidc.…``) names: its row goes, and the token is
    refused from now on; ``unauthorized`` when it had ended already."""
    with service.db.engine.begin() as conn:
        ended = oidc.end_session(conn, token.removeprefix(OIDC_PREFIX))
    if not ended:
        raise GatehouseError(
            ErrorCode.UNAUTHORIZED, "the session had already ended: there is nothing to end"
        )
