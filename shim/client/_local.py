"""Where the shim is, found as the CLI finds it: ``GATEHOUSE_URL``, else the stack a
``gatehouse up`` runs from this folder (``var/stack.json``, while it runs), else the
address ``gatehouse up`` serves by default."""

from __future__ import annotations

import os
from typing import TypedDict

from shim.stackfile import running_stack

__all__ = ["DEFAULT_URL", "Found", "found_shim", "shim_url"]

DEFAULT_URL = "http://127.0.0.1:8000"


def shim_url() -> tuple[str, str]:
    """The shim's base URL, and where it came from (to say so in help and errors)."""
    given = os.environ.get("GATEHOUSE_URL", "").strip()
    if given:
        return given, "GATEHOUSE_URL"
    stack = running_stack()
    if stack is not None:
        return stack.url, f"the stack `gatehouse up` runs ({stack.file})"
    return DEFAULT_URL, "the default"


class Found(TypedDict):
    """The shim a ``from_env`` client talks to: its URL, the token, the CA to trust."""

    base_url: str
    token: str | None
    ca: str | None


def found_shim(token: str | None) -> Found:
    """``shim_url``'s URL, ``token`` or else ``GATEHOUSE_TOKEN``, and ``GATEHOUSE_CA``."""
    return {
        "base_url": shim_url()[0],
        "token": token if token is not None else os.environ.get("GATEHOUSE_TOKEN"),
        "ca": os.environ.get("GATEHOUSE_CA") or None,
    }
