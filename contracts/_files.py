"""A settings file a person writes (YAML, or JSON, which YAML reads), checked
against its contract: the contract's model, or ``config_invalid`` naming the
file and the first thing wrong with it."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from contracts._errors import ErrorCode, GatehouseError

__all__ = ["load_settings_file", "named_secret"]

M = TypeVar("M", bound=BaseModel)


def load_settings_file(path: Path, model: type[M], what: str) -> M:
    """``path`` read as ``model``; ``what`` names the file in a refusal
    ("the notifications file")."""
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise GatehouseError(ErrorCode.CONFIG_INVALID, f"cannot read {what} {path}: {exc}") from exc
    except yaml.YAMLError as exc:
        raise GatehouseError(ErrorCode.CONFIG_INVALID, f"{what} {path} is not YAML: {exc}") from exc
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "(top)"
        raise GatehouseError(
            ErrorCode.CONFIG_INVALID, f"{what} {path}: {where}: {first['msg']}"
        ) from exc


def named_secret(
    path: Path, what: str, variable: str, purpose: str, env: Mapping[str, str] | None = None
) -> str:
    """The secret a settings file names the environment variable of (never holds), or
    ``config_invalid`` when that variable is unset or empty."""
    secret = (os.environ if env is None else env).get(variable, "")
    if not secret.strip():
        raise GatehouseError(
            ErrorCode.CONFIG_INVALID,
            f"{what} {path} names {variable} for {purpose}, and that variable is not set",
        )
    return secret
