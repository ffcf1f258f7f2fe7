"""The Slack file (``GATEHOUSE_SLACK``) and the secret it names, checked at start.

A Slack user may be mapped to no name Gatehouse records as its own actor
(``contracts.identities``): a file that maps one does not load."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from slack_sdk.signature import SignatureVerifier

from contracts import ErrorCode, GatehouseError, SlackConfig, load_settings_file, named_secret
from shim.tokens import reserved_reason

__all__ = ["SlackDoor", "open_slack"]


@dataclass(frozen=True)
class SlackDoor:
    """What the Slack route needs: the file's settings and the app's verifier."""

    config: SlackConfig
    verifier: SignatureVerifier

    def identity_of(self, slack_user: str) -> str | None:
        name = self.config.users.get(slack_user)
        return None if name is None or reserved_reason(name) is not None else name

    def may_reply_to(self, url: str) -> bool:
        """Whether ``url`` is a response_url the message may be updated at: https on
        one of ``response_hosts`` (plain http only to a loopback address)."""
        parts = urlsplit(url)
        host = parts.netloc.lower()
        if host not in self.config.response_hosts or parts.username or parts.password:
            return False
        if parts.scheme == "https":
            return True
        try:
            loopback = ipaddress.ip_address(parts.hostname or "").is_loopback
        except ValueError:
            loopback = False
        return parts.scheme == "http" and loopback


def open_slack(path: Path | None, env: dict[str, str] | None = None) -> SlackDoor | None:
    """The Slack door of the file at ``path`` (None: no file, no Slack route), or
    ``config_invalid``: a bad file, or the signing secret's variable unset."""
    if path is None:
        return None
    config = load_settings_file(path, SlackConfig, "the Slack file")
    for slack_user, name in config.users.items():
        reason = reserved_reason(name)
        if reason is not None:
            raise GatehouseError(
                ErrorCode.CONFIG_INVALID,
                f"the Slack file {path} maps users.{slack_user} to {reason}",
                {"slack_user": slack_user, "identity": name},
            )
    secret = named_secret(
        path, "the Slack file", config.signing_secret_env, "the app's signing secret", env
    )
    return SlackDoor(config, SignatureVerifier(secret))
