"""Sessions the identity provider's sign-in opens: a random token, shown once, whose
digest names a row of ``dashboard_sessions`` (the person and their roles then)."""

from __future__ import annotations

import secrets

from contracts import OidcConfig, OidcSession
from ledger import oidc
from shim.api.idp import OIDC_PREFIX, Person
from shim.api.services.core import Service

__all__ = ["open_session"]


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
