"""JSON value types and canonical hashing shared by every package."""

from __future__ import annotations

import hashlib
import json
import math
from typing import NoReturn, TypeAlias

from pydantic import JsonValue

__all__ = ["JsonObject", "JsonValue", "canonical_json", "digest_of", "sha256_hex", "strict_loads"]

# pydantic's JsonValue is a proper recursive alias that both pydantic and mypy understand.
JsonObject: TypeAlias = dict[str, JsonValue]


def canonical_json(value: JsonValue) -> str:
    """One spelling per value: sorted keys, no spaces, UTF-8 kept as is."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def digest_of(value: JsonValue) -> str:
    """SHA-256 of the canonical JSON spelling, as lowercase hex."""
    return sha256_hex(canonical_json(value).encode("utf-8"))


def _not_a_value(name: str) -> NoReturn:
    raise ValueError(f"{name} is not a JSON value")


def _finite(text: str) -> float:
    number = float(text)
    if not math.isfinite(number):
        raise ValueError(f"the number {text[:40]} does not fit a 64-bit float")
    return number


def strict_loads(text: str | bytes) -> JsonValue:
    """JSON as every boundary of Gatehouse reads it: ``NaN`` and ``Infinity`` are not
    JSON, and a number too large for a 64-bit float (``1e999``) is refused rather
    than read as infinity, which no JSON encoder can write back. ``ValueError`` for
    any bad input (``RecursionError`` for nesting Python cannot follow)."""
    parsed: JsonValue = json.loads(text, parse_constant=_not_a_value, parse_float=_finite)
    return parsed
