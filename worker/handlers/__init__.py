"""The handlers: one module per driver kind, and what every handler takes and returns.

The kinds are a fixed set (``registry.HANDLERS``: noop, http, restricted_shell,
opencode, mcp_proxy); no handler is loaded any other way. This façade exports
the types every handler shares (``_base``); the registry and each handler are
modules of their own, imported where they are needed, so that a module that
only needs the types does not load every handler.
"""

from worker.handlers._base import (
    Artifact,
    Handler,
    HandlerContext,
    HandlerResult,
    answer,
    describe_invalid,
    limits_of,
    nobody,
    status_of,
)

__all__ = [
    "Artifact",
    "Handler",
    "HandlerContext",
    "HandlerResult",
    "answer",
    "describe_invalid",
    "limits_of",
    "nobody",
    "status_of",
]
