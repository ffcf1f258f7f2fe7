"""The static handler registry: driver kind → handler, a literal mapping.

No dynamic import, no plugin discovery: what can run is what is written
here.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Final

from contracts import DriverKind
from worker.handlers import http, mcp_proxy, noop, opencode, restricted_shell
from worker.handlers._base import Handler

__all__ = ["HANDLERS"]

HANDLERS: Final[Mapping[DriverKind, Handler]] = MappingProxyType(
    {
        DriverKind.NOOP: noop.run,
        DriverKind.HTTP: http.run,
        DriverKind.RESTRICTED_SHELL: restricted_shell.run,
        DriverKind.OPENCODE: opencode.run,
        DriverKind.MCP_PROXY: mcp_proxy.run,
    }
)
