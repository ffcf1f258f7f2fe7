"""One way to refuse an archive: a GatehouseError with a stable code and JSON details."""

from __future__ import annotations

from typing import NoReturn

from contracts import ErrorCode, GatehouseError, JsonValue

__all__ = ["refuse"]


def refuse(code: ErrorCode, message: str, **details: JsonValue) -> NoReturn:
    raise GatehouseError(code, message, dict(details))
