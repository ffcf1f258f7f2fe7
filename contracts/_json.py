"""JSON value types and canonical hashing shared by every package."""

from __future__ import annotations

import hashlib
import json
import math
from typing import NoReturn, TypeAlias

from pydantic import JsonValue

__all__ = [
    "PLACEHOLDER_KEY",
    "JsonObject",
    "JsonValue",
    "canonical_json",
    "digest_of",
    "sha256_hex",
    "strict_loads",
    "with_placeholders",
]

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


# The key of the object that stands in, in an answer, for a stored value no JSON
# can carry (``{"gatehouse:placeholder": "non-finite number", "stored": "Infinity"}``).
PLACEHOLDER_KEY = "gatehouse:placeholder"


def _placeholder(number: float) -> JsonObject:
    stored = "NaN" if math.isnan(number) else ("Infinity" if number > 0 else "-Infinity")
    return {PLACEHOLDER_KEY: "non-finite number", "stored": stored}


def with_placeholders(value: object) -> tuple[object, int]:
    """``value`` with every number JSON cannot carry (infinity, NaN: stored before
    Gatehouse refused them at the door) replaced by a marked placeholder object, and
    how many were replaced. A value with none comes back as it is."""
    count = 0

    def walk(item: object) -> object:
        nonlocal count
        if isinstance(item, float) and not math.isfinite(item):
            count += 1
            return _placeholder(item)
        if isinstance(item, dict):
            return {k: walk(v) for k, v in item.items()}
        if isinstance(item, list | tuple):
            return [walk(v) for v in item]
        return item

    replaced = walk(value)
    return (replaced, count) if count else (value, 0)
