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
import re
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
    "PolicyFileError",
    "cedar_policy_set",
    "check_parameters",
    "list_cedar_policy_sets",
    "list_profiles",
    "list_recipes",
    "list_tool_pools",
    "load_all",
    "output_problems",
    "output_schema",
    "profile",
    "recipe",
    "reload",
    "tool_pool",
    "tool_pool_if_here",
    "with_cedar",
]

# A folder with more policy files in ``profiles/``, ``tool_pools/`` and ``cedar/``, read by the
# shim and the worker alike (both must be given the same one): an operator's own
# connectors, such as MCP servers with their pins, and profiles that allow them,
# without editing the package. Their ids may not shadow the shipped ones.
EXTRA_POLICIES_ENV = "GATEHOUSE_EXTRA_POLICIES"

M = TypeVar("M")
B = TypeVar("B", bound=BaseModel)


class PolicyFileError(RuntimeError):
    """A policy file that must stop the process: one line naming the file and the rule
    it breaks, every name in it escaped (a file name can hold any byte but ``/``)."""


# A policy file is named by the id it declares (an Identifier), and ".." never: an id
# ends up in messages, file names and replays, where neither a path nor a control
# character may ride in on it.
_FILE_ID = re.compile(r"[a-z0-9][a-z0-9._:-]{0,63}")
_NAME_RULE = (
    "a policy file is named <id>{suffix}, the id a lowercase letter or digit then at most"
    " 63 of a-z 0-9 . _ : -, without '..'"
)


def _shown(text: str, cap: int = 120) -> str:
    """``text`` as one printable line: controls and non-ASCII escaped, long ones cut."""
    escaped = text.encode("unicode_escape").decode("ascii")
    return escaped if len(escaped) <= cap else f"{escaped[:cap]}... ({len(text)} characters)"


def _file_id(where: str, name: str, suffix: str) -> str:
    """The id a policy file's name gives, or ``PolicyFileError`` naming the rule."""
    file_id = name.removesuffix(suffix)
    if not _FILE_ID.fullmatch(file_id) or ".." in file_id:
        raise PolicyFileError(f"{_shown(where)}/{_shown(name)}: {_NAME_RULE.format(suffix=suffix)}")
    return file_id


def _problem(exc: ValidationError) -> str:
    """The first thing pydantic found wrong, on one line (the count of the rest)."""
    errors = exc.errors()
    if not errors:
        return _shown(str(exc), 300)
    first = errors[0]
    loc = ".".join(str(part) for part in first["loc"]) or "(the file)"
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"{_shown(loc)}: {_shown(str(first['msg']), 300)}{more}"


def _read(where: str, entry: Path) -> bytes:
    try:
        return entry.read_bytes()
    except OSError as exc:
        raise PolicyFileError(
            f"{_shown(where)}/{_shown(entry.name)}: it cannot be read"
            f" ({_shown(exc.strerror or type(exc).__name__)})"
        ) from exc


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
    where = Path(str(resources.files(package))) if folder is None else folder
    for entry in _entries(package, where):
        if not entry.name.endswith(".json"):
            continue
        file_id = _file_id(package, entry.name, ".json")
        raw = _read(package, entry)
        try:
            parsed = model.model_validate_json(raw)
        except ValidationError as exc:
            # A broken policy file must stop the process, not be skipped silently.
            raise PolicyFileError(
                f"{_shown(package)}/{entry.name} is invalid: {_problem(exc)}"
            ) from exc
        key = str(getattr(parsed, id_field))
        if key != file_id:
            raise PolicyFileError(
                f"{_shown(package)}/{entry.name} declares {id_field} {_shown(key)!r}:"
                " a policy file is named by the id it declares; rename the file"
            )
        out[key] = Loaded(parsed, sha256_hex(raw), raw.decode("utf-8"))
    return out


def _entries(where_name: str, where: Path) -> list[Path]:
    """A policy folder's entries by name; one that cannot be listed stops the process."""
    try:
        return sorted(where.iterdir(), key=lambda e: e.name)
    except OSError as exc:
        raise PolicyFileError(
            f"{_shown(where_name)}: the folder cannot be read"
            f" ({_shown(exc.strerror or type(exc).__name__)})"
        ) from exc


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
        raise PolicyFileError(f"{_shown(str(folder))}: {clash} would shadow the shipped policies")
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
        raise PolicyFileError(f"{where} sets cedar_rules; name a policy set with cedar instead")
    if model.cedar is None:
        return found
    rules = _cedar_sets().get(model.cedar)
    if rules is None:
        raise PolicyFileError(
            f"{where} names Cedar policy set {model.cedar!r}, which policies/cedar does not"
            f" have (known: {sorted(_cedar_sets())})"
        )
    return Loaded(model.model_copy(update={"cedar_rules": rules.model}), found.digest, found.text)


def _cedar_folder(where: Path, name: str) -> dict[str, Loaded[CedarRules]]:
    out: dict[str, Loaded[CedarRules]] = {}
    pools = [p.model for p in _pools().values()]
    for entry in _entries(name, where):
        if not entry.name.endswith(".cedar"):
            continue
        set_id = _file_id(name, entry.name, ".cedar")
        raw = _read(name, entry)
        try:
            rules = load_policy_set(set_id, raw.decode("utf-8"), pools)
        except GatehouseError as exc:
            # A broken policy file must stop the process, not be skipped silently.
            raise PolicyFileError(
                f"{_shown(name)}/{entry.name}: {exc.code.value}: {_shown(exc.message, 600)}"
            ) from exc
        except UnicodeDecodeError as exc:
            raise PolicyFileError(
                f"{_shown(name)}/{entry.name} is invalid: it is not UTF-8 (byte {exc.start})"
            ) from exc
        except ValidationError as exc:
            raise PolicyFileError(
                f"{_shown(name)}/{entry.name} is invalid: {_problem(exc)}"
            ) from exc
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
        raise PolicyFileError(f"{_shown(str(folder))}: {clash} would shadow the shipped policies")
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
    where = "policies.output_schemas"
    for entry in _entries(where, Path(str(resources.files(where)))):
        if not entry.name.endswith(".json"):
            continue
        ref = _file_id(where, entry.name, ".json")
        raw = _read(where, entry)
        try:
            schema: JsonObject = json.loads(raw)
            jsonschema.Draft202012Validator.check_schema(schema)
        except (ValueError, jsonschema.SchemaError) as exc:
            first = str(exc).strip().splitlines()[:1]
            raise PolicyFileError(
                f"{where}/{entry.name} is invalid: {_shown(first[0] if first else '', 300)}"
            ) from exc
        out[ref] = Loaded(schema, sha256_hex(raw))
    return out


def load_all() -> None:
    """Read and check every policy file now, or ``PolicyFileError``: what the shim
    and the worker call at their start, so a bad file stops them with one line."""
    _profiles()
    _pools()
    _cedar_sets()
    _recipes()
    _output_schemas()


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


def tool_pool_if_here(tool_pool_id: str, digest: str | None = None) -> ToolPool | None:
    """The tool pool of that id as this process has it, to describe a run's plan by;
    None when it is not here (removed since, or this machine's files do not load) or,
    with ``digest``, is at another version than the run's."""
    try:
        found = tool_pool(tool_pool_id)
    except (GatehouseError, PolicyFileError):
        return None
    return found.model if digest is None or found.digest == digest else None


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
