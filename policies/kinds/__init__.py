"""Every driver kind's rules, listed once (``KINDS``): what the gate, the Cedar gate,
taint, the plan card, risk and the worker need to know of a kind, each kind in its
own module. Adding a kind: docs/development.md, "How to add a driver kind"."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from contracts import DriverKind
from policies.kinds._base import KindRules, Said, Wrong, short
from policies.kinds.http import Http
from policies.kinds.mcp_proxy import McpProxy
from policies.kinds.noop import Noop
from policies.kinds.opencode import Opencode
from policies.kinds.restricted_shell import RestrictedShell

__all__ = ["KINDS", "KindRules", "Said", "Wrong", "rules_of", "short"]

KINDS: Final[Mapping[DriverKind, KindRules]] = {
    DriverKind.NOOP: Noop(),
    DriverKind.HTTP: Http(),
    DriverKind.RESTRICTED_SHELL: RestrictedShell(),
    DriverKind.OPENCODE: Opencode(),
    DriverKind.MCP_PROXY: McpProxy(),
}


def rules_of(kind: DriverKind) -> KindRules:
    """The rules of ``kind``."""
    return KINDS[kind]
