"""Dashboard sign-ins through an identity provider: the logins in progress, the
sessions they made and the ID tokens those were opened with (``oidc_logins``,
``dashboard_sessions``, ``oidc_id_tokens``).

Only digests of the state and of the session cookie are stored: a copy of the
database lets nobody finish a sign-in or take over a session. A login is taken
once (the row goes as it is read) and only within ``LOGIN_TTL_S`` of its start.
An ID token is taken once too: its row stays until the token expires, and a
second take of it finds the row.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from ledger._db import Conn, iso, now_iso, sql
from ledger._statement import execute, rows_changed

__all__ = ["LOGIN_TTL_S", "Login", "Session", "end_session", "find_session", "start_login",
           "start_session", "take_id_token", "take_login"]  # fmt: skip

LOGIN_TTL_S = 10 * 60


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class Login:
    nonce: str
    verifier: str
    next_path: str


@dataclass(frozen=True)
class Session:
    identity: str
    roles: list[str]


def start_login(conn: Conn, state: str, login: Login) -> None:
    """Keep a sign-in the browser was just sent off with (older ones past their
    time go on the way)."""
    old = iso(datetime.now(UTC) - timedelta(seconds=LOGIN_TTL_S))
    execute(conn, sql("DELETE FROM oidc_logins WHERE created_at < :old"), {"old": old})
    execute(conn,
        sql(
            "INSERT INTO oidc_logins (state_sha256, nonce, verifier, next_path, created_at)"
            " VALUES (:s, :n, :v, :p, :t)"
        ),
        {"s": _digest(state), "n": login.nonce, "v": login.verifier, "p": login.next_path,
         "t": now_iso()},
    )  # fmt: skip


def take_login(conn: Conn, state: str) -> Login | None:
    """The sign-in ``state`` names, taken (a second callback finds nothing); None
    when there is none, or it is older than ``LOGIN_TTL_S``."""
    row = execute(
        conn,
        sql(
            "DELETE FROM oidc_logins WHERE state_sha256 = :s"
            " RETURNING nonce, verifier, next_path, created_at"
        ),
        {"s": _digest(state)},
    ).first()
    if row is None:
        return None
    old = iso(datetime.now(UTC) - timedelta(seconds=LOGIN_TTL_S))
    return None if str(row[3]) < old else Login(str(row[0]), str(row[1]), str(row[2]))


def start_session(conn: Conn, token: str, session: Session, *, issuer: str, hours: float) -> None:
    now = datetime.now(UTC)
    execute(conn, sql("DELETE FROM dashboard_sessions WHERE expires_at < :t"), {"t": iso(now)})
    execute(conn,
        sql(
            "INSERT INTO dashboard_sessions (session_sha256, identity, roles_json, issuer,"
            " created_at, expires_at) VALUES (:s, :i, :r, :u, :c, :e)"
        ),
        {"s": _digest(token), "i": session.identity, "r": json.dumps(sorted(session.roles)),
         "u": issuer, "c": iso(now), "e": iso(now + timedelta(hours=hours))},
    )  # fmt: skip


def find_session(conn: Conn, token: str) -> Session | None:
    row = execute(
        conn,
        sql(
            "SELECT identity, roles_json FROM dashboard_sessions"
            " WHERE session_sha256 = :s AND expires_at > :t"
        ),
        {"s": _digest(token), "t": now_iso()},
    ).first()
    if row is None:
        return None
    roles = json.loads(str(row[1]))
    return Session(str(row[0]), [str(r) for r in roles] if isinstance(roles, list) else [])


def end_session(conn: Conn, token: str) -> bool:
    """The session's row gone (its token is worth nothing from now on); False when
    there was none (never opened, ended already, or swept after it expired)."""
    gone = execute(
        conn, sql("DELETE FROM dashboard_sessions WHERE session_sha256 = :s"), {"s": _digest(token)}
    )
    return rows_changed(gone) > 0


def take_id_token(conn: Conn, token_key: str, *, identity: str, expires_at: datetime) -> bool:
    """Record that the ID token ``token_key`` names opened a session, kept until
    ``expires_at``; False when it had already (the row was there). Rows of tokens
    past their expiry go on the way: no token is taken after it expires."""
    now = now_iso()
    execute(conn, sql("DELETE FROM oidc_id_tokens WHERE expires_at < :t"), {"t": now})
    taken = execute(
        conn,
        sql(
            "INSERT INTO oidc_id_tokens (token_sha256, identity, used_at, expires_at)"
            " VALUES (:k, :i, :u, :e) ON CONFLICT (token_sha256) DO NOTHING"
            " RETURNING token_sha256"
        ),
        {"k": token_key, "i": identity, "u": now, "e": iso(expires_at)},
    ).first()
    return taken is not None
