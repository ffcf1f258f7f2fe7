"""Unit tests for policies.catalog: the shipped profiles, tool pools and recipes."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path

import pytest

import policies
from contracts import ErrorCode, GatehouseError, JsonObject, validate_instance
from policies import catalog

POLICIES_DIR = Path(policies.__file__).resolve().parent
FOLDERS = {
    "profiles": "ds.gatehouse_policy_profile_v1",
    "tool_pools": "ds.gatehouse_tool_pool_v1",
    "recipes": "ds.gatehouse_recipe_v1",
}


def _files(folder: str) -> list[Path]:
    return sorted((POLICIES_DIR / folder).glob("*.json"))


def _ids(folder: str) -> list[str]:
    return sorted(p.stem for p in _files(folder))


def test_every_folder_ships_something() -> None:
    for folder in FOLDERS:
        assert _files(folder), f"policies/{folder} has no JSON files"


def test_every_shipped_file_loads() -> None:
    assert sorted(p.model.profile_id for p in catalog.list_profiles()) == _ids("profiles")
    assert sorted(p.model.tool_pool_id for p in catalog.list_tool_pools()) == _ids("tool_pools")
    assert sorted(r.model.recipe_id for r in catalog.list_recipes()) == _ids("recipes")


@pytest.mark.parametrize(
    ("folder", "path"),
    [(folder, path) for folder in FOLDERS for path in _files(folder)],
    ids=lambda v: v if isinstance(v, str) else v.name,
)
def test_every_shipped_file_matches_its_schema(folder: str, path: Path) -> None:
    validate_instance(FOLDERS[folder], json.loads(path.read_bytes()), ErrorCode.INTERNAL_ERROR)


@pytest.mark.parametrize("profile_id", _ids("profiles"))
def test_profile_digest_is_sha256_of_the_file(profile_id: str) -> None:
    raw = (POLICIES_DIR / "profiles" / f"{profile_id}.json").read_bytes()
    assert catalog.profile(profile_id).digest == hashlib.sha256(raw).hexdigest()


@pytest.mark.parametrize("tool_pool_id", _ids("tool_pools"))
def test_tool_pool_digest_is_sha256_of_the_file(tool_pool_id: str) -> None:
    raw = (POLICIES_DIR / "tool_pools" / f"{tool_pool_id}.json").read_bytes()
    assert catalog.tool_pool(tool_pool_id).digest == hashlib.sha256(raw).hexdigest()


@pytest.mark.parametrize("recipe_id", _ids("recipes"))
def test_recipe_digest_is_sha256_of_the_file(recipe_id: str) -> None:
    raw = (POLICIES_DIR / "recipes" / f"{recipe_id}.json").read_bytes()
    assert catalog.recipe(recipe_id).digest == hashlib.sha256(raw).hexdigest()


def test_recipes_have_what_their_planner_needs() -> None:
    for loaded in catalog.list_recipes():
        recipe = loaded.model
        if recipe.planner == "template":
            assert recipe.plan_template is not None, recipe.recipe_id
        else:
            assert recipe.model_prompt, recipe.recipe_id


def test_shipped_pools_only_name_driver_kinds_some_profile_allows() -> None:
    allowed = {k for p in catalog.list_profiles() for k in p.model.allowed_driver_kinds}
    for loaded in catalog.list_tool_pools():
        for connector in loaded.model.connectors:
            assert connector.driver_kind in allowed, connector.connector_id
            assert connector.limits is not None, connector.connector_id


@pytest.mark.parametrize(
    ("lookup", "code"),
    [
        (catalog.profile, ErrorCode.UNKNOWN_PROFILE),
        (catalog.tool_pool, ErrorCode.UNKNOWN_TOOL_POOL),
        (catalog.recipe, ErrorCode.UNKNOWN_RECIPE),
    ],
)
@pytest.mark.parametrize("unknown", ["nope", "", "Default", "default.json", "../profiles/default"])
def test_unknown_ids_are_refused(
    lookup: Callable[[str], object], code: ErrorCode, unknown: str
) -> None:
    with pytest.raises(GatehouseError) as info:
        lookup(unknown)
    assert info.value.code is code
    known = info.value.details["known"]
    assert isinstance(known, list) and known
    names = [k for k in known if isinstance(k, str)]
    assert names == sorted(names) == known


def test_loaded_is_cached() -> None:
    assert catalog.profile("default") is catalog.profile("default")


# --- check_parameters -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "parameters",
    [
        {},
        {"base_url": "http://example.com"},
        {"base_url": "http://127.0.0.1:8080/extra"},
        {"base_url": "https://127.0.0.1:8080"},
        {"base_url": 8080},
        {"base_url": "http://127.0.0.1:8080", "extra": 1},
    ],
)
def test_check_parameters_refuses_bad_parameters(parameters: JsonObject) -> None:
    recipe = catalog.recipe("demo-inventory").model
    with pytest.raises(GatehouseError) as info:
        catalog.check_parameters(recipe, parameters)
    assert info.value.code is ErrorCode.INVALID_REQUEST
    errors = info.value.details["errors"]
    assert isinstance(errors, list) and errors
    for error in errors:
        assert isinstance(error, dict)
        path = error["path"]
        assert isinstance(path, str) and path.startswith("/parameters")


def test_check_parameters_names_the_offending_parameter() -> None:
    recipe = catalog.recipe("demo-inventory").model
    with pytest.raises(GatehouseError) as info:
        catalog.check_parameters(recipe, {"base_url": 1})
    assert info.value.details["errors"] == [
        {"path": "/parameters/base_url", "problem": "1 is not of type 'string'"}
    ]


def test_check_parameters_accepts_good_parameters() -> None:
    catalog.check_parameters(
        catalog.recipe("demo-inventory").model, {"base_url": "http://127.0.0.1:1"}
    )
    catalog.check_parameters(catalog.recipe("echo").model, {"anything": ["goes", 1, None]})
