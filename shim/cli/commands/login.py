"""``gatehouse login``: sign in with the company's identity provider from a terminal
(OAuth device authorization) and print a session token for ``GATEHOUSE_TOKEN``.

The shim says where to sign in (``GET /auth/oidc``); the person opens the address
printed, signs in there and confirms the code; the command polls the provider until
they did, then trades the ID token for a Gatehouse session (``POST /auth/oidc/exchange``:
the person's identity, the roles of their groups, ``session_hours`` long). Stdout is
one line, ``export GATEHOUSE_TOKEN=oidc.…``, so ``eval "$(gatehouse login)"`` works;
everything for the person goes to stderr.
"""

from __future__ import annotations

import argparse
import ssl
import sys
import time

import httpx

from contracts import JsonObject
from shim.cli.errors import Exit, FailedError, UsageError
from shim.cli.options import api_options
from shim.cli.output import note, write_json

__all__ = ["add_arguments", "run"]

_DEVICE_GRANT = "urn:ietf:params:oauth:grant-type:device_code"


def add_arguments(p: argparse.ArgumentParser) -> None:
    api_options(p)


def _json(answer: httpx.Response, what: str) -> JsonObject:
    try:
        found = answer.json()
    except ValueError as exc:
        raise FailedError(f"{what} did not answer JSON (HTTP {answer.status_code})") from exc
    if not isinstance(found, dict):
        raise FailedError(f"{what} did not answer a JSON object")
    return found


def _device_code(info: JsonObject) -> JsonObject:
    endpoint = info.get("device_authorization_endpoint")
    if not isinstance(endpoint, str):
        raise FailedError("the identity provider offers no device sign-in for terminals")
    scopes = info.get("scopes")
    scope = " ".join(str(s) for s in scopes) if isinstance(scopes, list) else "openid"
    started = httpx.post(endpoint, data={"client_id": info.get("client_id"), "scope": scope},
                         timeout=15)  # fmt: skip
    found = _json(started, "the identity provider")
    if not started.is_success or not isinstance(found.get("device_code"), str):
        raise FailedError(f"the identity provider refused to start a sign-in: {found.get('error')}")
    return found


def _id_token(info: JsonObject, device: JsonObject) -> str:
    """Poll the provider until the person has signed in (or refused, or let it expire)."""
    interval = float(str(device.get("interval", 5)))
    deadline = time.monotonic() + float(str(device.get("expires_in", 600)))
    form = {"grant_type": _DEVICE_GRANT, "device_code": device["device_code"],
            "client_id": info.get("client_id")}  # fmt: skip
    while time.monotonic() < deadline:
        time.sleep(interval)
        answer = httpx.post(str(info.get("token_endpoint")), data=form, timeout=15)
        found = _json(answer, "the identity provider")
        token = found.get("id_token")
        if answer.is_success and isinstance(token, str):
            return token
        error = found.get("error")
        if error == "slow_down":
            interval += 5
        elif error != "authorization_pending":
            raise FailedError(f"the sign-in did not complete: {error}")
    raise FailedError("the sign-in was not completed in time; run gatehouse login again")


def run(args: argparse.Namespace) -> int:
    verify: ssl.SSLContext | bool = ssl.create_default_context(cafile=args.ca) if args.ca else True
    with httpx.Client(base_url=args.url, verify=verify, timeout=15, trust_env=False) as shim:
        asked = shim.get("/auth/oidc")
        info = _json(asked, "the shim")
        if asked.status_code == 404:
            raise UsageError("this shim does not sign the CLI in with an identity provider;"
                             " use a bearer token (GATEHOUSE_TOKEN)")  # fmt: skip
        device = _device_code(info)
        where = device.get("verification_uri_complete") or device.get("verification_uri")
        note(f"to sign in, open {where} and confirm the code {device.get('user_code')}")
        id_token = _id_token(info, device)
        exchanged = shim.post("/auth/oidc/exchange", json={"id_token": id_token})
        session = _json(exchanged, "the shim")
    if not exchanged.is_success:
        error = session.get("error")
        said = error.get("message") if isinstance(error, dict) else exchanged.status_code
        raise FailedError(f"the shim refused the sign-in: {said}")
    if args.json:
        write_json(session)
        return Exit.OK
    roles = session.get("roles")
    shown = ", ".join(map(str, roles)) if isinstance(roles, list) else ""
    hours = int(str(session.get("expires_in_s", 0))) / 3600
    note(f"signed in as {session.get('identity')} ({shown}) for {hours:g} h")
    sys.stdout.write(f"export GATEHOUSE_TOKEN={session.get('token')}\n")
    return Exit.OK
