"""A real OpenID Provider in a child process: panva's oidc-provider (OpenID
Certified), from npm (``mise run setup:oidc``), run with the machine's Node.

``OidcProvider`` starts it on a free port with one client (``gatehouse``) and
the given accounts and groups; ``sign_in`` plays the person's browser through
the provider's own login and consent pages and answers the callback URL the
provider sends the browser back to (the shim's, with ``code`` and ``state``)."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

__all__ = ["CLIENT_SECRET", "OidcProvider", "provider_or_skip"]

HERE = Path(__file__).parent / "oidc"
CLIENT_SECRET = "gatehouse-test-client-secret"


def provider_or_skip() -> None:
    if (HERE / "node_modules" / "oidc-provider").is_dir():
        return
    reason = "no oidc-provider in tests/support/oidc: run `mise run setup:oidc`"
    if os.environ.get("CI"):
        pytest.fail(reason)  # the gate must run it
    pytest.skip(reason)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class OidcProvider:
    def __init__(self, redirect_uri: str, accounts: dict[str, list[str]]) -> None:
        self.port = _free_port()
        self.issuer = f"http://127.0.0.1:{self.port}"
        self.redirect_uri = redirect_uri
        self.accounts = accounts
        self.proc: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> OidcProvider:
        self.proc = subprocess.Popen(
            ["node", str(HERE / "provider.mjs"), str(self.port), self.redirect_uri,
             CLIENT_SECRET, json.dumps(self.accounts)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                httpx.get(f"{self.issuer}/.well-known/openid-configuration", timeout=1)
                return self
            except httpx.HTTPError:
                time.sleep(0.1)
        raise AssertionError("the OpenID Provider did not start")

    def __exit__(self, *_: object) -> None:
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(10)

    def sign_in(self, authorize_url: str, login: str) -> str:
        """Through the provider's login and consent pages as ``login``; the URL it
        sends the browser back to."""
        with httpx.Client(follow_redirects=False, timeout=10) as browser:
            answer = browser.get(authorize_url)
            for _ in range(12):
                if answer.status_code in (302, 303):
                    where = str(answer.headers["location"])
                    if where.startswith(self.redirect_uri):
                        return where
                    answer = browser.get(httpx.URL(self.issuer).join(where))
                    continue
                action, fields = self._form(answer.text, login)
                answer = browser.post(action, data=fields)
        raise AssertionError("the provider never sent the browser back")

    def confirm_device(self, verification_url: str, login: str) -> str:
        """A terminal's sign-in confirmed in the browser as ``login``: through the
        code's confirmation, login and consent pages; the text of the last page."""
        with httpx.Client(follow_redirects=True, timeout=10) as browser:
            answer = browser.get(verification_url)
            for _ in range(8):
                if "<form" not in answer.text:
                    return answer.text
                action, fields = self._form(answer.text, login)
                answer = browser.post(httpx.URL(self.issuer).join(action), data=fields)
        raise AssertionError("the device sign-in never finished")

    @staticmethod
    def _form(html: str, login: str) -> tuple[str, dict[str, Any]]:
        found = re.search(r'<form[^>]*action="([^"]+)"', html)
        assert found is not None, html[:500]
        fields: dict[str, Any] = dict(
            re.findall(r'<input[^>]*name="([^"]+)"[^>]*value="([^"]*)"', html)
        )
        if 'name="login"' in html:
            fields.update(login=login, password="any")
        return found.group(1), fields
