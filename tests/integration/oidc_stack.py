"""A stack that signs in through the real OpenID provider, for the sign-in tests."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.support.oidc_provider import CLIENT_SECRET, OidcProvider, provider_or_skip
from tests.support.stack import Stack, running_stack

__all__ = ["signed_stack"]


@contextmanager
def signed_stack(
    backend: str,
    tmp: Path,
    callback: str,
    accounts: dict[str, list[str]],
    roles: dict[str, list[str]],
) -> Iterator[tuple[Stack, OidcProvider]]:
    """A running stack whose dashboard and CLI sign in through a real provider holding
    ``accounts`` (login → groups), its groups mapped to Gatehouse roles by ``roles``."""

    provider_or_skip()
    os.environ["GATEHOUSE_TEST_OIDC_SECRET"] = CLIENT_SECRET
    with OidcProvider(callback, accounts) as idp:
        file = tmp / "oidc.yaml"
        file.write_text(json.dumps({
            "issuer": idp.issuer, "client_id": "gatehouse",
            "client_secret_env": "GATEHOUSE_TEST_OIDC_SECRET", "redirect_uri": callback,
            "roles": roles, "cli_client_id": "gatehouse-cli",
        }))  # fmt: skip
        with running_stack(backend, tmp, shim_env={"GATEHOUSE_OIDC": str(file)}) as s:
            yield s, idp
