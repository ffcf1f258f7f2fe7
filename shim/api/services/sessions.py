"""Sessions the identity provider's sign-in opens: a random token, shown once, whose
digest names a row of ``dashboard_sessions`` (the person and their roles then), until
it expires or is ended (``gatehouse logout``, the dashboard's sign-out). The ID token
a session is opened with opens no other: ``oidc_token_replayed``."""

from __future__ import annotations

import secrets
from datetime import UTC, datetime

from contracts import ErrorCode, GatehouseError, OidcConfig, OidcSession
from ledger import oidc
from shim.api.idp import OIDC_PREFIX, Person
from shim.api.services.core import Service

__all__ = ["end_session", "open_session"]

_AT_MOST_S = 24 * 3600


def open_session(service: Service, person: Person, config: OidcConfig) -> OidcSession:
    token = secrets.token_urlsafe(32)
    roles = sorted(person.roles)
    with service.db.engine.begin() as conn:
        if person.token_key is not None and not oidc.take_id_token(
            conn, person.token_key, identity=person.identity, expires_at=_kept_until(person, config)
        ):
            raise GatehouseError(
                ErrorCode.OIDC_TOKEN_REPLAYED,
                "this ID token was already exchanged for a session: sign in again",
                {"identity": person.identity},
            )
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


def _kept_until(person: Person, config: OidcConfig) -> datetime:
    """Until when the token's use is remembered: while any check could still take it
    (its expiry, with the clock leeway), at most a day. Nothing takes it later than
    that: the CLI's exchange takes a token only within minutes of its issue, and the
    dashboard's only with the nonce of a sign-in that is itself taken once."""
    now = datetime.now(UTC).timestamp()
    until = now + _AT_MOST_S
    if person.token_expires is not None:
        until = min(until, person.token_expires + config.leeway_s)
    return datetime.fromtimestamp(until, UTC)


def end_session(service: Service, token: str) -> None:
    """End the session ``token`` (``oidc.…``) names: its row goes, and the token is
    refused from now on; ``unauthorized`` when it had ended already."""
    with service.db.engine.begin() as conn:
        ended = oidc.end_session(conn, token.removeprefix(OIDC_PREFIX))
    if not ended:
        raise GatehouseError(
            ErrorCode.UNAUTHORIZED, "the session had already ended: there is nothing to end"
        )
