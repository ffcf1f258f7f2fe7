"""Who is looking at the dashboard, and whether a form really came from it.

Logging in is giving the shim a bearer token, the same token the API takes: it
is checked against the token store, then kept in an HttpOnly, SameSite=Strict
cookie scoped to ``/dashboard`` (Secure when the page came over HTTPS). Each
request is identified by that token afresh, so roles apply exactly as on the
API and a token removed from the store stops working at once. Signing in with
the identity provider (``oidc.py``) puts ``oidc.`` and a random session token in
the same cookie instead: its digest names the session's row (identity, roles).

Forms carry a token derived from the session's token (``csrf_of``), checked on
every POST together with the ``Origin`` header when the browser sends one: a
page on another site can neither read the value nor, with SameSite=Strict,
send the cookie.
"""

from __future__ import annotations

import hashlib
import hmac

from fastapi import Request
from starlette.responses import Response

from shim.api.idp import OIDC_PREFIX

__all__ = [
    "COOKIE",
    "OIDC_PREFIX",
    "csrf_of",
    "forget",
    "remember",
    "same_origin",
    "session_token",
]

COOKIE = "gatehouse_session"
_PATH = "/dashboard"
_MAX_AGE_S = 8 * 3600


def session_token(request: Request) -> str | None:
    token = request.cookies.get(COOKIE)
    return token if token else None


def csrf_of(token: str) -> str:
    return hashlib.sha256(b"gatehouse-dashboard-csrf\x00" + token.encode("utf-8")).hexdigest()


def same_origin(request: Request) -> bool:
    """No Origin header (older clients) passes; one naming another site does not."""
    origin = request.headers.get("origin")
    if origin is None:
        return True
    own = f"{request.url.scheme}://{request.url.netloc}"
    return hmac.compare_digest(origin.rstrip("/"), own)


def remember(response: Response, request: Request, token: str) -> None:
    response.set_cookie(
        COOKIE,
        token,
        max_age=_MAX_AGE_S,
        path=_PATH,
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )


def forget(response: Response) -> None:
    response.delete_cookie(COOKIE, path=_PATH, httponly=True, samesite="strict")
