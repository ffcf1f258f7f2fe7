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
    "kept_loads",
    "placeholder",
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


# The key of the object that stands for a number no JSON can carry
# (``{"gatehouse:placeholder": "non-finite number", "stored": "Infinity"}``): in an
# answer, for a value stored before the door refused them; in the record, for one a
# tool or provider answered with (an MCP result, OpenCode's API), which is kept, not
# refused, and never silently turned into ``null`` or a look-alike string.
PLACEHOLDER_KEY = "gatehouse:placeholder"


def placeholder(number: float) -> JsonObject:
    """The one spelling of a non-finite number: ``stored`` is ``NaN``, ``Infinity`` or
    ``-Infinity``."""
    stored = "NaN" if math.isnan(number) else ("Infinity" if number > 0 else "-Infinity")
    return {PLACEHOLDER_KEY: "non-finite number", "stored": stored}


def _kept_constant(name: str) -> JsonObject:
    return placeholder(float(name))  # "NaN", "Infinity", "-Infinity"


def _kept_float(text: str) -> float | JsonObject:
    number = float(text)
    return number if math.isfinite(number) else placeholder(number)


def kept_loads(text: str | bytes) -> JsonValue:
    """JSON from a tool or provider whose answer is recorded, not refused: ``NaN``,
    ``Infinity`` and a number too large for a 64-bit float (``1e999``) each become
    the ``placeholder``, so what is stored is JSON every reader can parse back.
    ``ValueError`` for text that is not JSON otherwise."""
    parsed: JsonValue = json.loads(text, parse_constant=_kept_constant, parse_float=_kept_float)
    return parsed


def with_placeholders(value: object) -> tuple[object, int]:
    """``value`` with every number JSON cannot carry (infinity, NaN: stored before
    Gatehouse refused them at the door) replaced by a marked placeholder object, and
    how many were replaced. A value with none comes back as it is."""
    count = 0

    def walk(item: object) -> object:
        nonlocal count
        if isinstance(item, float) and not math.isfinite(item):
            count += 1
            return placeholder(item)
        if isinstance(item, dict):
            return {k: walk(v) for k, v in item.items()}
        if isinstance(item, list | tuple):
            return [walk(v) for v in item]
        return item

    replaced = walk(value)
    return (replaced, count) if count else (value, 0)
