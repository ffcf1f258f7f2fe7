"""The shim's typed settings, read once from the environment at start."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from contracts import APP_VERSION, ErrorCode, GatehouseError
from ledger import resolve_database_url
from ledger.anchors import DEFAULT_ANCHOR_FILE
from opa_format import DEFAULT_TRUST_DIR

__all__ = ["ShimSettings"]


@dataclass(frozen=True)
class ShimSettings:
    database_url: str
    app_version: str
    max_body_bytes: int
    max_archive_bytes: int  # an OPA archive posted to /intent, enforced while reading
    tokens_file: Path | None
    opa_trust_dir: Path  # PEM certificates signed OPA archives are verified against
    # A worker silent this long is not live (readiness, gatehouse workers); the
    # workers' own reaper uses the same variable to declare one dead.
    dead_after_s: float = 6.0
    # The anchor file the workers append run checkpoints to (ledger verify reads it).
    anchor_file: Path = Path(DEFAULT_ANCHOR_FILE)

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> ShimSettings:
        e = dict(os.environ) if env is None else env
        max_body = _bytes(e, "GATEHOUSE_MAX_BODY_BYTES", 1024 * 1024)
        max_archive = _bytes(e, "GATEHOUSE_MAX_ARCHIVE_BYTES", 32 * 1024 * 1024)
        return cls(
            database_url=resolve_database_url(e)[0],
            app_version=e.get("GATEHOUSE_APP_VERSION", APP_VERSION),
            max_body_bytes=max_body,
            max_archive_bytes=max_archive,
            opa_trust_dir=Path(e.get("GATEHOUSE_OPA_TRUST_DIR") or DEFAULT_TRUST_DIR),
            dead_after_s=_seconds(e, "GATEHOUSE_DEAD_AFTER_S", 6.0),
            anchor_file=Path(e.get("GATEHOUSE_ANCHOR_FILE") or DEFAULT_ANCHOR_FILE),
            tokens_file=Path(e["GATEHOUSE_TOKENS_FILE"])
            if e.get("GATEHOUSE_TOKENS_FILE")
            else None,
        )


def _bytes(env: dict[str, str], key: str, default: int) -> int:
    try:
        value = int(env.get(key, str(default)))
    except ValueError as exc:
        raise GatehouseError(ErrorCode.INVALID_REQUEST, f"{key} must be an integer") from exc
    if value <= 0:
        raise GatehouseError(ErrorCode.INVALID_REQUEST, f"{key} must be positive")
    return value


def _seconds(env: dict[str, str], key: str, default: float) -> float:
    try:
        value = float(env.get(key, str(default)))
    except ValueError as exc:
        raise GatehouseError(ErrorCode.INVALID_REQUEST, f"{key} must be a number") from exc
    if value <= 0:
        raise GatehouseError(ErrorCode.INVALID_REQUEST, f"{key} must be positive")
    return value
