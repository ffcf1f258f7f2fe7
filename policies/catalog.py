"""The profiles, tool pools, recipes and Cedar policy sets in force: versioned files.

They ship inside the package (``policies/profiles``, ``policies/tool_pools``,
``policies/recipes``, ``policies/cedar``) and are read once, validated against
their schema, and kept with their SHA-256 digest so a run can record exactly
what it ran under. A Cedar policy set is validated against the schema generated
from every tool pool (``policies.cedar_gate``), and a profile that names one
carries its text (``PolicyProfile.cedar_rules``).
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
    CedarRules,
    ErrorCode,
    GatehouseError,
    JsonObject,
    JsonValue,
    PolicyProfile,
    Recipe,
    ToolPool,
    sha256_hex,
)
from policies.cedar_gate import load_policy_set

__all__ = [
    "EXTRA_POLICIES_ENV",
    "Loaded",
    "cedar_policy_set",
    "check_parameters",
    "list_cedar_policy_sets",
    "list_profiles",
    "list_recipes",
    "list_tool_pools",
    "output_problems",
    "output_schema",
    "profile",
    "recipe",
    "reload",
    "tool_pool",
    "with_cedar",
]

# A folder with more policy files in ``profiles/``, ``tool_pools/`` and ``cedar/``, read by the
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
    loaded = _with_extra(shipped, "profiles", PolicyProfile, "profile_id")
    return {pid: with_cedar(p, f"profile {pid!r}") for pid, p in loaded.items()}


def with_cedar(found: Loaded[PolicyProfile], where: str) -> Loaded[PolicyProfile]:
    """A profile with the text of the Cedar policy set it names (in force today)."""
    model = found.model
    if model.cedar_rules is not None:
        raise RuntimeError(f"{where} sets cedar_rules; name a policy set with cedar instead")
    if model.cedar is None:
        return found
    rules = _cedar_sets().get(model.cedar)
    if rules is None:
        raise RuntimeError(
            f"{where} names Cedar policy set {model.cedar!r}, which policies/cedar does not"
            f" have (known: {sorted(_cedar_sets())})"
        )
    return Loaded(model.model_copy(update={"cedar_rules": rules.model}), found.digest, found.text)


def _cedar_folder(where: Path, name: str) -> dict[str, Loaded[CedarRules]]:
    out: dict[str, Loaded[CedarRules]] = {}
    pools = [p.model for p in _pools().values()]
    for entry in sorted(where.iterdir(), key=lambda e: e.name):
        if not entry.name.endswith(".cedar"):
            continue
        raw = entry.read_bytes()
        set_id = entry.name.removesuffix(".cedar")
        try:
            rules = load_policy_set(set_id, raw.decode("utf-8"), pools)
        except GatehouseError as exc:
            # A broken policy file must stop the process, not be skipped silently.
            raise RuntimeError(f"{name}/{entry.name}: {exc.code.value}: {exc.message}") from exc
        except (UnicodeDecodeError, ValidationError) as exc:
            raise RuntimeError(f"{name}/{entry.name} is invalid: {exc}") from exc
        out[set_id] = Loaded(rules, rules.digest, rules.text)
    return out


@cache
def _cedar_sets() -> dict[str, Loaded[CedarRules]]:
    shipped = _cedar_folder(Path(str(resources.files("policies.cedar"))), "policies.cedar")
    extra = os.environ.get(EXTRA_POLICIES_ENV)
    folder = Path(extra, "cedar") if extra else None
    if folder is None or not folder.is_dir():
        return shipped
    added = _cedar_folder(folder, str(folder))
    clash = sorted(set(added) & set(shipped))
    if clash:
        raise RuntimeError(f"{folder}: {clash} would shadow the shipped policies")
    return {**shipped, **added}


def cedar_policy_set(policy_set_id: str) -> Loaded[CedarRules] | None:
    """A Cedar policy set in force today, if one has that id."""
    return _cedar_sets().get(policy_set_id)


def list_cedar_policy_sets() -> list[Loaded[CedarRules]]:
    return list(_cedar_sets().values())


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


def reload() -> None:
    """Read the policy files again on their next use: after ``GATEHOUSE_EXTRA_POLICIES``
    changed in this process (a test giving the stack an operator's own files)."""
    for cached in (_profiles, _cedar_sets, _pools, _recipes, _output_schemas):
        cached.cache_clear()


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
