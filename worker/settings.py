"""The worker's typed settings, read once from the environment at start."""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from pathlib import Path

from contracts import APP_VERSION, ErrorCode, GatehouseError

__all__ = ["WorkerSettings"]


@dataclass(frozen=True)
class WorkerSettings:
    database_url: str
    executor_id: str
    app_version: str
    workspace_root: Path
    model_base_url: str | None
    model_name: str
    model_api_key: str | None
    worker_concurrency: int
    queue_poll_s: float  # how often this worker looks for queued intents
    crash_point: str | None  # test hook: see worker/_crash.py

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> WorkerSettings:
        e = dict(os.environ) if env is None else env
        url = e.get("GATEHOUSE_DATABASE_URL", "sqlite:///var/gatehouse.sqlite")
        try:
            concurrency = int(e.get("GATEHOUSE_WORKER_CONCURRENCY", "4"))
        except ValueError as exc:
            raise GatehouseError(
                ErrorCode.INVALID_REQUEST, "GATEHOUSE_WORKER_CONCURRENCY must be an integer"
            ) from exc
        try:
            queue_poll = float(e.get("GATEHOUSE_QUEUE_POLL_S", "0.25"))
        except ValueError as exc:
            raise GatehouseError(
                ErrorCode.INVALID_REQUEST, "GATEHOUSE_QUEUE_POLL_S must be a number of seconds"
            ) from exc
        return cls(
            database_url=url,
            executor_id=e.get("GATEHOUSE_EXECUTOR_ID", f"worker-{socket.gethostname()}"),
            app_version=e.get("GATEHOUSE_APP_VERSION", APP_VERSION),
            workspace_root=Path(e.get("GATEHOUSE_WORKSPACE_ROOT", "var/workspaces")).resolve(),
            model_base_url=e.get("GATEHOUSE_MODEL_BASE_URL") or None,
            model_name=e.get("GATEHOUSE_MODEL_NAME", "planner"),
            model_api_key=e.get("GATEHOUSE_MODEL_API_KEY") or None,
            worker_concurrency=max(1, concurrency),
            queue_poll_s=min(10.0, max(0.05, queue_poll)),
            crash_point=e.get("GATEHOUSE_CRASH_POINT") or None,
        )
