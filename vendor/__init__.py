"""Third-party contracts re-expressed for this project: MOVA 4.1.1 episode schemas.

``mova-4.1.1/`` holds this project's own copies of two upstream schemas, with
upstream's ``$id``s, rewritten so that instances can validate (see its
README). They are package data: nothing is fetched over the network.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from functools import cache
from importlib import resources

import jsonschema
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

__all__ = [
    "MOVA_BASE",
    "MOVA_SCHEMAS",
    "date_time_checker",
    "mova_id",
    "mova_schema",
    "mova_validator",
]

MOVA_BASE = "https://mova.dev/schemas/"
MOVA_SCHEMAS = ("ds.mova_episode_core_v1", "ds.security_event_episode_core_v1")
_FOLDER = "mova-4.1.1"
# RFC 3339 date-time (what JSON Schema's "date-time" format means).
_DATE_TIME = re.compile(
    r"^\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])[Tt]([01]\d|2[0-3]):[0-5]\d:([0-5]\d|60)"
    r"(\.\d+)?([Zz]|[+-]([01]\d|2[0-3]):[0-5]\d)$"
)


def mova_id(name: str) -> str:
    return f"{MOVA_BASE}{name}.schema.json"


def mova_schema(name: str) -> dict[str, object]:
    """The named schema (one of ``MOVA_SCHEMAS``), read from the package data."""
    if name not in MOVA_SCHEMAS:
        raise KeyError(f"no vendored MOVA schema {name!r}; have {', '.join(MOVA_SCHEMAS)}")
    folder = resources.files("vendor").joinpath(_FOLDER)
    text = folder.joinpath(f"{name}.schema.json").read_text("utf-8")
    loaded = json.loads(text)
    if not isinstance(loaded, dict):  # pragma: no cover - the files are ours
        raise TypeError(f"{name}: a schema must be a JSON object")
    return {str(k): v for k, v in loaded.items()}


@cache
def _registry() -> Registry[bool | Mapping[str, object]]:
    registry: Registry[bool | Mapping[str, object]] = Registry()
    for name in MOVA_SCHEMAS:
        resource = Resource.from_contents(mova_schema(name), default_specification=DRAFT202012)
        registry = registry.with_resource(mova_id(name), resource)
    return registry


def date_time_checker() -> jsonschema.FormatChecker:
    """A format checker that asserts ``date-time`` (RFC 3339) and nothing else."""
    checker = jsonschema.FormatChecker(formats=())

    @checker.checks("date-time")
    def _date_time(value: object) -> bool:
        return not isinstance(value, str) or _DATE_TIME.match(value) is not None

    return checker


@cache
def mova_validator(name: str) -> jsonschema.Draft202012Validator:
    """A validator of the named schema; ``$ref``s resolve locally, ``date-time`` is checked."""
    return jsonschema.Draft202012Validator(
        mova_schema(name), registry=_registry(), format_checker=date_time_checker()
    )
