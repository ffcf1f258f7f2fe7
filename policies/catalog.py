"""The profiles, tool pools and recipes in force: versioned JSON files.

They ship inside the package (``policies/profiles``, ``policies/tool_pools``,
``policies/recipes``) and are read once, validated against their schema, and
kept with their SHA-256 digest so a run can record exactly what it ran under.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Generic, TypeVar

import jsonschema
from pydantic import BaseModel, ValidationError

from contracts import (
    ErrorCode,
    GatehouseError,
    JsonObject,
    JsonValue,
    PolicyProfile,
    Recipe,
    ToolPool,
    sha256_hex,
)

__all__ = [
    "EXTRA_POLICIES_ENV",
    "Loaded",
    "check_parameters",
    "list_profiles",
    "list_recipes",
    "list_tool_pools",
    "output_problems",
    "output_schema",
    "profile",
    "recipe",
    "tool_pool",
]

# A folder with more policy files in ``profiles/`` and ``tool_pools/``, read by the
# shim and the worker alike (both must be given the same one): an operator's own
# connectors, such as MCP servers with their pins, and profiles that allow them,
# without editing the package. Their ids may not shadow the shipped ones.
EXTRA_POLICIES_ENV = "GATEHOUSE_EXTRA_POLICIES"

M = TypeVar("M")
B = TypeVar("B", bound=BaseModel)


@dataclass(frozen=True)
class Loaded(Generic[M]):
    model: M
    digest: str  # SHA-256 of the file's bytes
    text: str = ""  # the file's text (kept with runs, so a replay can use this version)


def _load_folder(
    package: str, model: type[B], id_field: str, folder: Path | None = None
) -> dict[str, Loaded[B]]:
    """The files of a package folder, or of ``folder`` (named ``package`` in messages)."""
    out: dict[str, Loaded[B]] = {}
    where = resources.files(package) if folder is None else folder
    for entry in sorted(where.iterdir(), key=lambda e: e.name):
        if not entry.name.endswith(".json"):
            continue
        raw = entry.read_bytes()
        try:
            parsed = model.model_validate_json(raw)
        except ValidationError as exc:
            # A broken policy file must stop the process, not be skipped silently.
            raise RuntimeError(f"{package}/{entry.name} is invalid: {exc}") from exc
        key = str(getattr(parsed, id_field))
        if entry.name != f"{key}.json":
            raise RuntimeError(f"{package}/{entry.name} declares id {key!r}; rename the file")
        out[key] = Loaded(parsed, sha256_hex(raw), raw.decode("utf-8"))
    return out


def _with_extra(
    shipped: dict[str, Loaded[B]], sub: str, model: type[B], id_field: str
) -> dict[str, Loaded[B]]:
    extra = os.environ.get(EXTRA_POLICIES_ENV)
    folder = Path(extra, sub) if extra else None
    if folder is None or not folder.is_dir():
        return shipped
    added = _load_folder(str(folder), model, id_field, folder)
    clash = sorted(set(added) & set(shipped))
    if clash:
        raise RuntimeError(f"{folder}: {clash} would shadow the shipped policies")
    return {**shipped, **added}


@cache
def _profiles() -> dict[str, Loaded[PolicyProfile]]:
    shipped = _load_folder("policies.profiles", PolicyProfile, "profile_id")
    return _with_extra(shipped, "profiles", PolicyProfile, "profile_id")


@cache
def _pools() -> dict[str, Loaded[ToolPool]]:
    shipped = _load_folder("policies.tool_pools", ToolPool, "tool_pool_id")
    return _with_extra(shipped, "tool_pools", ToolPool, "tool_pool_id")


@cache
def _recipes() -> dict[str, Loaded[Recipe]]:
    return _load_folder("policies.recipes", Recipe, "recipe_id")


@cache
def _output_schemas() -> dict[str, Loaded[JsonObject]]:
    out: dict[str, Loaded[JsonObject]] = {}
    for entry in sorted(resources.files("policies.output_schemas").iterdir(), key=lambda e: e.name):
        if not entry.name.endswith(".json"):
            continue
        raw = entry.read_bytes()
        schema: JsonObject = json.loads(raw)
        jsonschema.Draft202012Validator.check_schema(schema)
        out[entry.name.removesuffix(".json")] = Loaded(schema, sha256_hex(raw))
    return out


def output_schema(ref: str) -> Loaded[JsonObject] | None:
    """A step's declared output schema (``output_schema_ref``), if one has that id."""
    return _output_schemas().get(ref)


def output_problems(ref: str, output: JsonObject) -> list[str]:
    """Why ``output`` does not match schema ``ref`` (empty: it does)."""
    found = output_schema(ref)
    if found is None:
        return [f"no output schema {ref!r}"]
    validator = jsonschema.Draft202012Validator(found.model)
    return [
        f"/{'/'.join(str(p) for p in e.absolute_path)}: {e.message[:200]}"
        for e in sorted(validator.iter_errors(output), key=lambda e: list(e.absolute_path))[:10]
    ]


def profile(profile_id: str) -> Loaded[PolicyProfile]:
    found = _profiles().get(profile_id)
    if found is None:
        raise GatehouseError(
            ErrorCode.UNKNOWN_PROFILE,
            f"no policy profile {profile_id!r}",
            {"known": list[JsonValue](sorted(_profiles()))},
        )
    return found


def tool_pool(tool_pool_id: str) -> Loaded[ToolPool]:
    found = _pools().get(tool_pool_id)
    if found is None:
        raise GatehouseError(
            ErrorCode.UNKNOWN_TOOL_POOL,
            f"no tool pool {tool_pool_id!r}",
            {"known": list[JsonValue](sorted(_pools()))},
        )
    return found


def recipe(recipe_id: str) -> Loaded[Recipe]:
    found = _recipes().get(recipe_id)
    if found is None:
        raise GatehouseError(
            ErrorCode.UNKNOWN_RECIPE,
            f"no recipe {recipe_id!r}",
            {"known": list[JsonValue](sorted(_recipes()))},
        )
    return found


def list_profiles() -> list[Loaded[PolicyProfile]]:
    return list(_profiles().values())


def list_tool_pools() -> list[Loaded[ToolPool]]:
    return list(_pools().values())


def list_recipes() -> list[Loaded[Recipe]]:
    return list(_recipes().values())


def check_parameters(found: Recipe, parameters: JsonObject) -> None:
    """Refuse parameters that do not match the recipe's own schema."""
    validator = jsonschema.Draft202012Validator(found.parameters_schema)
    errors = sorted(validator.iter_errors(parameters), key=lambda e: list(e.absolute_path))
    if errors:
        raise GatehouseError(
            ErrorCode.INVALID_REQUEST,
            f"parameters do not match recipe {found.recipe_id!r}",
            {
                "errors": [
                    {
                        "path": "/parameters/" + "/".join(str(p) for p in e.absolute_path),
                        "problem": e.message[:300],
                    }
                    for e in errors[:20]
                ]
            },
        )
