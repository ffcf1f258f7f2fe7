"""The CLI against answers scripted with httpx's own mock transport (no shim process):
for what the CLI sends and says, not for what the shim does."""

from __future__ import annotations

from collections.abc import Callable

import httpx
import pytest

from shim.cli import options as cli_options
from shim.cli.client import Client

Handler = Callable[[httpx.Request], httpx.Response]


@pytest.fixture
def answered_by(monkeypatch: pytest.MonkeyPatch) -> Callable[[Handler], None]:
    """``answered_by(handler)``: every client a command connects with is answered by it."""

    def install(handler: Handler) -> None:
        def client(url: str, token: str | None, **kwargs: object) -> Client:
            api = Client(url, token)
            api._http = httpx.Client(base_url=url, transport=httpx.MockTransport(handler))
            return api

        monkeypatch.setattr(cli_options, "Client", client)

    return install
