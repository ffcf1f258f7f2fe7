"""The shim's typed settings, read once from the environment at start."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from contracts import APP_VERSION, ErrorCode, GatehouseError
from ledger import DEFAULT_DATABASE_URL
from opa_format import DEFAULT_TRUST_DIR

__all__ = ["ShimSettings"]


@dataclass(frozen=True)
class ShimSettings:
    database_url: str
    app_version: str
    max_body_bytes: int
    tokens_file: Path | None
    opa_trust_dir: Path  # PEM certificates signed OPA archives are verified against

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> ShimSettings:
        e = dict(os.environ) if env is None else env
        try:
            max_body = int(e.get("GATEHOUSE_MAX_BODY_BYTES", str(1024 * 1024)))
        except ValueError as exc:
            raise GatehouseError(
                ErrorCode.INVALID_REQUEST, "GATEHOUSE_MAX_BODY_BYTES must be an integer"
            ) from exc
        return cls(
            database_url=e.get("GATEHOUSE_DATABASE_URL", DEFAULT_DATABASE_URL),
            app_version=e.get("GATEHOUSE_APP_VERSION", APP_VERSION),
            max_body_bytes=max_body,
            opa_trust_dir=Path(e.get("GATEHOUSE_OPA_TRUST_DIR") or DEFAULT_TRUST_DIR),
            tokens_file=Path(e["GATEHOUSE_TOKENS_FILE"])
            if e.get("GATEHOUSE_TOKENS_FILE")
            else None,
        )
