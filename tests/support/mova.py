"""Checking episodes against MOVA 4.1.1: this project's schemas and upstream's own files.

Upstream's files are read from ``../shared/mova-4.1.1`` (never copied into the
repo, never fetched over the network). Upstream's
``ds.security_event_episode_core_v1`` cannot be satisfied as published: it is
``allOf[episode_core, {security fields, additionalProperties: false}]`` and
the episode core is closed too, so each branch rejects the other's fields.
A security episode is therefore checked in two parts against upstream:

* the fields the episode core declares, against upstream's episode core as is;
* the whole episode against upstream's security branch (``allOf[1]``) with
  ``additionalProperties: false`` kept but the core's field names declared
  (as ``true``), so only the defect is relaxed: an unknown field still fails.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonschema
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

import vendor

__all__ = [
    "CORE",
    "SECURITY",
    "Upstream",
    "is_security",
    "load_upstream",
    "vendor_errors",
]

CORE = "ds.mova_episode_core_v1"
SECURITY = "ds.security_event_episode_core_v1"


def is_security(body: dict[str, Any]) -> bool:
    return str(body.get("episode_type", "")).split("/")[0] == "security_event"


def _messages(validator: jsonschema.Draft202012Validator, instance: object) -> list[str]:
    return [
        f"/{'/'.join(str(p) for p in e.absolute_path)}: {e.message}"
        for e in validator.iter_errors(instance)
    ]


def vendor_errors(body: dict[str, Any]) -> list[str]:
    """Problems of ``body`` against ``vendor/mova-4.1.1`` (core or security event)."""
    return _messages(vendor.mova_validator(SECURITY if is_security(body) else CORE), body)


@dataclass(frozen=True)
class Upstream:
    root: Path
    registry: Registry[Any]
    core: jsonschema.Draft202012Validator
    security_part: jsonschema.Draft202012Validator
    core_fields: frozenset[str]
    episode_types: dict[str, bool]  # core id -> allows subtypes
    security_event_types: frozenset[str]
    action_types: frozenset[str]
    security_model_versions: frozenset[str]

    def episode_type_problem(self, episode_type: str) -> str | None:
        """``None`` when the type is a catalog core id, or ``core_id/subtype`` where allowed."""
        core, sep, sub = episode_type.partition("/")
        if core not in self.episode_types:
            return f"{episode_type!r}: {core!r} is not a core id of the episode type catalog"
        if sep and (not sub or not self.episode_types[core]):
            return f"{episode_type!r}: bad subtype for {core!r}"
        return None

    def errors(self, body: dict[str, Any]) -> list[str]:
        """Problems of ``body`` against upstream's files (see the module docstring)."""
        problems: list[str] = []
        if (bad := self.episode_type_problem(str(body.get("episode_type")))) is not None:
            problems.append(bad)
        if not is_security(body):
            return problems + _messages(self.core, body)
        core_part = {k: v for k, v in body.items() if k in self.core_fields}
        problems += [f"core part {m}" for m in _messages(self.core, core_part)]
        problems += [f"security part {m}" for m in _messages(self.security_part, body)]
        kind = str(body.get("security_event_type"))
        if kind not in self.security_event_types and ":" not in kind:
            problems.append(f"security_event_type {kind!r} is neither a catalog id nor namespaced")
        for action in body.get("actions_taken", []):
            if action.get("action_type") not in self.action_types:
                problems.append(f"action_type {action.get('action_type')!r} is not in the catalog")
        if body.get("security_model_version") not in self.security_model_versions:
            problems.append(f"security_model_version {body.get('security_model_version')!r}")
        return problems


def _json(path: Path) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(path.read_text("utf-8"))
    return loaded


def load_upstream(shared: Path) -> Upstream:
    root = shared / "mova-4.1.1"
    registry: Registry[Any] = Registry()
    schemas: dict[str, dict[str, Any]] = {}
    for path in sorted((root / "schemas").glob("*.schema.json")):
        schema = _json(path)
        schemas[path.name.removesuffix(".schema.json")] = schema
        registry = registry.with_resource(
            schema["$id"], Resource.from_contents(schema, default_specification=DRAFT202012)
        )
    checker = vendor.date_time_checker()
    core = jsonschema.Draft202012Validator(
        {"$ref": schemas[CORE]["$id"]}, registry=registry, format_checker=checker
    )
    (core_branch,) = [b for b in schemas[CORE]["allOf"] if "properties" in b]
    core_fields = frozenset(core_branch["properties"])
    # The upstream defect, relaxed and nothing else: the security branch also
    # accepts the episode core's fields (which the other allOf branch checks).
    part = copy.deepcopy(schemas[SECURITY]["allOf"][1])
    assert part["additionalProperties"] is False, "upstream changed: revisit this workaround"
    part["properties"] = {**dict.fromkeys(core_fields, True), **part["properties"]}
    security_part = jsonschema.Draft202012Validator(part, format_checker=checker)

    types = _json(root / "global.episode_type_catalog_v1.json")
    security = _json(root / "global.security_catalog_v1.json")
    return Upstream(
        root=root,
        registry=registry,
        core=core,
        security_part=security_part,
        core_fields=core_fields,
        episode_types={t["id"]: bool(t["allows_subtypes"]) for t in types["episode_type"]},
        security_event_types=frozenset(t["id"] for t in security["security_event_type"]),
        action_types=frozenset(t["id"] for t in security["security_action_type"]),
        security_model_versions=frozenset(
            p["security_model_version"] for p in security["security_policy_profile"]
        ),
    )
