"""``validate_instance`` answers as jsonschema does, with jsonschema-rs's quick yes first.

Only a yes is taken from the quick check, so what must never happen is a yes where
jsonschema finds something wrong: ``validate_instance`` is compared, schema by
schema, with a jsonschema validator of its own made here from the public registry.
Instances are drawn from each schema's own vocabulary (its property names, enum and
const values, typical values), so they reach its branches. A valid body is shown to
be passed without jsonschema being asked at all.
"""

from __future__ import annotations

from typing import Any

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contracts import (
    SCHEMA_MODELS,
    ErrorCode,
    GatehouseError,
    JsonObject,
    schema_id,
    schema_registry,
    validate_instance,
)
from tests.support.plans import noop_plan


def _vocabulary(node: Any, keys: set[str], words: set[Any]) -> None:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "properties" and isinstance(value, dict):
                keys.update(value)
            if key in ("enum", "examples") and isinstance(value, list):
                words.update(v for v in value if isinstance(v, (str, int, bool)))
            if key == "const" and isinstance(value, (str, int, bool)):
                words.add(value)
            _vocabulary(value, keys, words)
    elif isinstance(node, list):
        for item in node:
            _vocabulary(item, keys, words)


def _instances(name: str) -> st.SearchStrategy[Any]:
    keys: set[str] = set()
    words: set[Any] = set()
    _vocabulary(schema_registry().contents(schema_id(name)), keys, words)
    scalars = (
        st.none()
        | st.booleans()
        | st.integers(min_value=-(2**53), max_value=2**53)
        | st.floats(allow_nan=False, allow_infinity=False)
        | st.text(max_size=12)
        | st.sampled_from(sorted(words, key=repr) or [""])
        | st.sampled_from(["", "a", "x" * 300, "sha256:" + "0" * 64, "2026-01-01T00:00:00Z"])
    )
    names = st.sampled_from(sorted(keys) or ["k"]) | st.text(max_size=6)
    return st.recursive(
        scalars,
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(names, inner, max_size=8),
        max_leaves=30,
    )


def _accepted(name: str, instance: Any) -> bool:
    try:
        validate_instance(name, instance, ErrorCode.INVALID_REQUEST)
    except GatehouseError:
        return False
    return True


@pytest.mark.parametrize("name", sorted(SCHEMA_MODELS))
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_validate_instance_answers_as_jsonschema(name: str, data: st.DataObject) -> None:
    instance = data.draw(_instances(name))
    reference = jsonschema.Draft202012Validator(
        {"$ref": schema_id(name)}, registry=schema_registry()
    )
    assert _accepted(name, instance) == reference.is_valid(instance)


def test_a_valid_body_is_passed_without_jsonschema(monkeypatch: pytest.MonkeyPatch) -> None:
    def asked(*_: object, **__: object) -> None:
        raise AssertionError("jsonschema was asked about a valid body")

    monkeypatch.setattr(jsonschema.Draft202012Validator, "iter_errors", asked)
    plan = noop_plan(3)
    body: JsonObject = {"recipe": "echo", "objective": "x", "mode": "run-plan", "plan": plan}
    validate_instance("env.intent_request_v1", body, ErrorCode.INVALID_REQUEST)


def test_an_invalid_body_is_explained_by_jsonschema() -> None:
    plan = noop_plan(3)
    body: JsonObject = {"recipe": "echo", "objective": "x", "mode": "sideways", "plan": plan}
    with pytest.raises(GatehouseError) as caught:
        validate_instance("env.intent_request_v1", body, ErrorCode.INVALID_REQUEST)
    assert caught.value.code is ErrorCode.INVALID_REQUEST
    errors = caught.value.details["errors"]
    assert isinstance(errors, list)
    assert [e["path"] for e in errors if isinstance(e, dict)] == ["/mode"]
