"""JSON value types and canonical hashing shared by every package."""

from __future__ import annotations

import hashlib
import json
from typing import TypeAlias

from pydantic import JsonValue

__all__ = ["JsonObject", "JsonValue", "canonical_json", "digest_of", "sha256_hex"]

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
