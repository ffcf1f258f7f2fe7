"""The context a test hands a handler it calls directly, as ``worker.calls`` would:
the worker's settings from the environment's defaults (or ``env``), and nobody
having cancelled the run."""

from __future__ import annotations

from worker.handlers import HandlerContext
from worker.runtime import WorkerSettings

__all__ = ["handler_context"]


def handler_context(env: dict[str, str] | None = None) -> HandlerContext:
    return HandlerContext(WorkerSettings.from_env(env or {}))
