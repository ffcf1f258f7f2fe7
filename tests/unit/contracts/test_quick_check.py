"""jsonschema-rs's quick yes (``validate_instance``'s fast path) agrees with jsonschema.

Only a yes is taken from the quick check, so the one thing that must never happen
is a yes where jsonschema finds something wrong. Instances are drawn from each
schema's own vocabulary (its property names, enum and const values, typical
values), so they reach its branches; known-valid instances are checked too.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contracts import SCHEMA_MODELS, ErrorCode, GatehouseError, JsonObject, validate_instance
from contracts._schemas import _flat, _passes, _validator
from tests.support.plans import noop_plan

QUICK = sorted(name for name in SCHEMA_MODELS if _flat(name) is not None)


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
    _vocabulary(_flat(name), keys, words)
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


@pytest.mark.parametrize("name", QUICK)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_the_quick_yes_is_never_a_no_of_jsonschema(name: str, data: st.DataObject) -> None:
    instance = data.draw(_instances(name))
    passes = _passes(name)
    assert passes is not None
    if passes(instance):
        assert list(_validator(name).iter_errors(instance)) == []


def test_a_valid_request_passes_and_an_invalid_one_is_explained() -> None:
    body: JsonObject = {
        "recipe": "echo",
        "objective": "x",
        "mode": "run-plan",
        "plan": noop_plan(3),
    }
    passes = _passes("env.intent_request_v1")
    assert passes is not None and passes(body)
    validate_instance("env.intent_request_v1", body, ErrorCode.INVALID_REQUEST)
    body["mode"] = "sideways"
    with pytest.raises(GatehouseError) as caught:
        validate_instance("env.intent_request_v1", body, ErrorCode.INVALID_REQUEST)
    assert caught.value.code is ErrorCode.INVALID_REQUEST
    errors = caught.value.details["errors"]
    assert isinstance(errors, list)
    assert [e["path"] for e in errors if isinstance(e, dict)] == ["/mode"]
