"""The static handler registry: driver kind → handler, a literal mapping.

No dynamic import, no plugin discovery: what can run is what is written
here. ``mcp_proxy`` is a known driver kind with no handler in this build; a
step naming it is refused before anything runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Final

from contracts import DriverKind
from worker.handlers import http, noop, opencode, restricted_shell
from worker.handlers._base import Handler

__all__ = ["HANDLERS"]

HANDLERS: Final[Mapping[DriverKind, Handler]] = MappingProxyType(
    {
        DriverKind.NOOP: noop.run,
        DriverKind.HTTP: http.run,
        DriverKind.RESTRICTED_SHELL: restricted_shell.run,
        DriverKind.OPENCODE: opencode.run,
    }
)
