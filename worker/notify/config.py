"""The notifications file named by ``GATEHOUSE_NOTIFICATIONS`` (YAML or JSON)."""

from __future__ import annotations

from pathlib import Path

import yaml
from pydantic import ValidationError

from contracts import ErrorCode, GatehouseError, NotifyConfig

__all__ = ["load_config"]


def load_config(path: Path) -> NotifyConfig:
    """The file's settings, or CONFIG_INVALID naming what is wrong with it."""
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise GatehouseError(
            ErrorCode.CONFIG_INVALID, f"cannot read the notifications file {path}: {exc}"
        ) from exc
    except yaml.YAMLError as exc:
        raise GatehouseError(
            ErrorCode.CONFIG_INVALID, f"the notifications file {path} is not YAML: {exc}"
        ) from exc
    try:
        return NotifyConfig.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "(top)"
        raise GatehouseError(
            ErrorCode.CONFIG_INVALID,
            f"the notifications file {path}: {where}: {first['msg']}",
        ) from exc
