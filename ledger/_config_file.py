"""``dbos-config.yaml``: where Gatehouse and the DBOS tools find the database.

The file in the working folder is read the way the DBOS CLI reads it: YAML,
``${VAR}`` replaced by the variable's value (empty when unset), the database in
``system_database_url``. Gatehouse honours it only when its ``name`` is
``gatehouse`` (another DBOS application's file is not ours to follow).

Which URL a process uses, first found wins:

1. ``--database-url`` (commands that take it);
2. ``GATEHOUSE_DATABASE_URL``, when set and not empty;
3. ``system_database_url`` in ``./dbos-config.yaml``, when not empty;
4. ``sqlite:///gatehouse.sqlite``, the same file the DBOS CLI falls back to for an
   application named ``gatehouse``, so ``dbos workflow list`` finds it unaided.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path

import yaml

from contracts import ErrorCode, GatehouseError

__all__ = ["APP_NAME", "CONFIG_FILE", "DEFAULT_DATABASE_URL", "resolve_database_url"]

APP_NAME = "gatehouse"
CONFIG_FILE = "dbos-config.yaml"
# The embedded default: one SQLite file, for one machine (what DBOS's CLI assumes too).
DEFAULT_DATABASE_URL = f"sqlite:///{APP_NAME}.sqlite"
_VAR = re.compile(r"\$\{([^}]+)\}")


def _configured(path: Path, env: Mapping[str, str]) -> str | None:
    """``system_database_url`` from the file, or None (no file, not Gatehouse's, empty)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise GatehouseError(ErrorCode.CONFIG_INVALID, f"{path}: {exc.strerror}") from exc
    try:
        data = yaml.safe_load(_VAR.sub(lambda m: env.get(m.group(1), ""), text))
    except yaml.YAMLError as exc:
        raise GatehouseError(ErrorCode.CONFIG_INVALID, f"{path} is not YAML: {exc}") from exc
    if not isinstance(data, dict) or data.get("name") != APP_NAME:
        return None
    url = data.get("system_database_url")
    if url is not None and not isinstance(url, str):
        raise GatehouseError(
            ErrorCode.CONFIG_INVALID, f"{path}: system_database_url must be a string"
        )
    return (url or "").strip() or None


def resolve_database_url(
    env: Mapping[str, str] | None = None, folder: Path | None = None
) -> tuple[str, str]:
    """(database URL, where it came from) by the order in this module's docstring,
    from ``GATEHOUSE_DATABASE_URL`` on (a flag, when given, is the caller's to prefer)."""
    e = os.environ if env is None else env
    if e.get("GATEHOUSE_DATABASE_URL", "").strip():
        return e["GATEHOUSE_DATABASE_URL"].strip(), "GATEHOUSE_DATABASE_URL"
    path = (folder or Path.cwd()) / CONFIG_FILE
    configured = _configured(path, e)
    if configured is not None:
        return configured, str(path)
    return DEFAULT_DATABASE_URL, "the default database URL"
