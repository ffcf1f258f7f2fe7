"""The episode builders: pure, deterministic, and MOVA 4.1.1 episodes every time.

Every episode is validated against ``vendor/mova-4.1.1`` (this project's
re-expression of MOVA's schemas) and, when ``../shared`` is present, against
upstream's own files (see ``tests/support/mova.py`` for how upstream's
unsatisfiable security-event schema is handled).
"""

from __future__ import annotations

import ast
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema
import pytest

import vendor
from contracts import DataRef, Episode, ErrorCode, SecurityEpisode, validate_instance
from policies.episodes import episode, episode_id, security_episode
from policies.security import classify
from tests.support.mova import CORE, SECURITY, Upstream, load_upstream, vendor_errors

ROOT = Path(__file__).resolve().parents[3]
AT = "2025-01-02T03:04:05.678Z"
LATER = "2025-01-02T03:04:09.000Z"


@pytest.fixture(scope="module")
def upstream(shared_dir: Path | None) -> Upstream:
    if shared_dir is None or not (shared_dir / "mova-4.1.1").is_dir():
        pytest.skip("../shared/mova-4.1.1 (upstream MOVA 4.1.1) is absent: no upstream check")
    return load_upstream(shared_dir)


def _step(recorded_at: str = AT, **overrides: Any) -> Episode:
    args: dict[str, Any] = {
        "run_id": "run_1",
        "kind": "step",
        "subject": "fetch",
        "episode_type": "execution/http",
        "status": "completed",
        "summary": "step fetch succeeded",
        "executor_id": "worker-1",
        "recorded_at": recorded_at,
        "details": {"step_id": "fetch", "op_key": None, "error_code": None},
        "outputs": [
            DataRef(data_type="artifact", data_id="body", sha256="a" * 64),
            DataRef(data_type="artifact"),
        ],
    }
    args.update(overrides)
    return episode(**args)


def _refusal(code: ErrorCode = ErrorCode.COMMAND_NOT_ALLOWED, **overrides: Any) -> SecurityEpisode:
    args: dict[str, Any] = {
        "run_id": "run_1",
        "subject": "plan",
        "code": code,
        "message": f"refused: {code.value}",
        "executor_id": "worker-1",
        "recorded_at": AT,
        "details": {"phase": "gate", "refusal": {"step_id": "s1"}},
    }
    args.update(overrides)
    return security_episode(**args)


CORE_EPISODES: dict[str, Callable[[], Episode]] = {
    "plan": lambda: _step(
        kind="plan",
        subject="d" * 64,
        episode_type="plan/agent_plan",
        summary="plan of 5 step(s) passed the gate",
        outputs=[DataRef(data_type="env.mova_agent_plan_v1", data_id="run_1", sha256="d" * 64)],
    ),
    "approval": lambda: _step(
        kind="decision", episode_type="execution/approval", executor_id="bob", outputs=None
    ),
    "step": _step,
    "failed step": lambda: _step(status="failed", details={"error_code": "handler_failed"}),
    "with inputs": lambda: _step(inputs=[DataRef(data_type="ds.x_v1", data_id="x")]),
    "summary": lambda: _step(
        kind="summary", subject="run", episode_type="execution/run_summary", outputs=None
    ),
}


# --- core episodes ----------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(CORE_EPISODES))
def test_core_episode_is_valid_against_the_vendor_schema(name: str) -> None:
    body = CORE_EPISODES[name]().model_dump(mode="json")
    assert vendor_errors(body) == []
    validate_instance("ds.gatehouse_episode_v1", body, ErrorCode.INTERNAL_ERROR)
    assert Episode.model_validate(body).model_dump(mode="json") == body


def test_unset_optional_fields_are_left_out_not_null() -> None:
    """MOVA types them as strings: ``null`` would not validate."""
    body = _step().model_dump(mode="json")
    assert "started_at" not in body and "finished_at" not in body
    assert body["output_data_refs"][1] == {"data_type": "artifact"}
    assert body["input_envelopes"] == [
        {"envelope_type": "env.intent_request_v1", "envelope_id": "run_1"}
    ]
    # ...but Gatehouse's own facts keep their nulls: result_details is an open object.
    assert body["result_details"] == {
        "run_id": "run_1",
        "step_id": "fetch",
        "op_key": None,
        "error_code": None,
    }


def test_episode_id_is_derived_from_run_kind_and_subject_only() -> None:
    first, again = _step(), _step(recorded_at=LATER, summary="again", status="failed")
    assert first.episode_id == again.episode_id == episode_id("run_1", "step", "fetch")
    assert first.episode_id.startswith("ep_") and len(first.episode_id) == 35
    assert _step(subject="size").episode_id != first.episode_id
    assert _step(kind="plan").episode_id != first.episode_id
    assert _step(run_id="run_2").episode_id != first.episode_id


def test_builders_are_pure() -> None:
    """Same arguments, same episode: the time is an argument, nothing is read."""
    assert _step() == _step()
    assert _refusal() == _refusal()
    assert _step(recorded_at=LATER).recorded_at == LATER
    tree = ast.parse((ROOT / "policies" / "episodes.py").read_text("utf-8"))
    imported = {
        (node.module or "").split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom)
    } | {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    assert imported <= {"__future__", "typing", "contracts", "policies"}, imported


# --- security episodes ------------------------------------------------------------------------


@pytest.mark.parametrize("code", list(ErrorCode), ids=lambda c: c.value)
def test_every_error_code_yields_a_valid_security_episode(code: ErrorCode) -> None:
    ep = _refusal(code)
    body = ep.model_dump(mode="json")
    assert vendor_errors(body) == []
    validate_instance("ds.gatehouse_security_episode_v1", body, ErrorCode.INTERNAL_ERROR)
    assert SecurityEpisode.model_validate(body) == ep
    category, severity = classify(code)
    assert body["security_event_category"] == category
    assert body["severity"] == severity
    assert body["episode_type"] == f"security_event/{code.value}"
    assert body["security_event_type"] == f"gatehouse:{code.value}"


def test_security_episode_fields() -> None:
    body = _refusal().model_dump(mode="json")
    assert body["result_status"] == "failed"
    assert body["result_summary"] == "refused: command_not_allowed"
    assert body["security_model_version"] == "1.0.0"
    assert body["detection_source"] == "runtime_guard"
    assert body["actions_taken"] == [
        {
            "action_type": "block",
            "taken_at": AT,
            "actor": "worker-1",
            "status": "completed",
            "details": "refused: command_not_allowed",
        }
    ]
    assert body["result_details"] == {
        "run_id": "run_1",
        "error_code": "command_not_allowed",
        "phase": "gate",
        "refusal": {"step_id": "s1"},
    }
    # No profile known: no profile fields at all (rather than nulls).
    assert "policy_profile_id" not in body and "policy_ref" not in body
    assert body["episode_id"] == episode_id("run_1", "security", "plan")


def test_security_episode_names_the_profile_and_rule_when_known() -> None:
    body = _refusal(profile_id="default", profile_version="3").model_dump(mode="json")
    assert body["policy_profile_id"] == "default"
    assert body["policy_ref"] == {
        "policy_document_id": "gatehouse:profile/default",
        "rule_id": "command_not_allowed",
        "policy_version": "3",
    }
    assert vendor_errors(body) == []


def test_security_episode_without_a_run() -> None:
    ep = _refusal(ErrorCode.UNAUTHORIZED, run_id=None, subject="request:abc")
    body = ep.model_dump(mode="json")
    assert ep.episode_id == episode_id("", "security", "request:abc")
    assert body["input_envelopes"] == []  # present, as MOVA's anyOf asks, and empty
    assert body["result_details"]["run_id"] is None
    assert vendor_errors(body) == []


# --- the vendor schemas themselves ------------------------------------------------------------


@pytest.mark.parametrize("name", vendor.MOVA_SCHEMAS)
def test_vendor_schemas_are_valid_and_keep_upstream_ids(name: str) -> None:
    schema = vendor.mova_schema(name)
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema["$id"] == f"https://mova.dev/schemas/{name}.schema.json"
    assert schema["title"] == name


def test_vendor_schemas_ship_as_package_data() -> None:
    import tomllib

    data = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))
    assert data["tool"]["setuptools"]["package-data"]["vendor"] == ["mova-4.1.1/*.json"]
    shipped = {p.name for p in (ROOT / "vendor" / "mova-4.1.1").glob("*.json")}
    assert shipped == {f"{n}.schema.json" for n in vendor.MOVA_SCHEMAS}


def test_vendor_security_schema_still_refuses_what_upstream_means_to_refuse() -> None:
    good = _refusal().model_dump(mode="json")
    validator = vendor.mova_validator(SECURITY)
    assert validator.is_valid(good)
    for broken in (
        {**good, "surprise": 1},  # closed: unknown fields are refused
        {**good, "schema_id": SECURITY},  # upstream's core refuses it too
        {**good, "episode_type": "execution/x"},
        {**good, "severity": "urgent"},
        {**good, "security_event_category": "phishing"},
        {**good, "detection_source": "oracle"},
        {**good, "recorded_at": "yesterday"},
        {**good, "actions_taken": [{"action_type": "block", "status": "done"}]},
        {k: v for k, v in good.items() if k != "security_model_version"},
        {k: v for k, v in good.items() if k not in ("input_envelopes", "input_data_refs")},
        {**good, "executor": {**good["executor"], "shell": "bash"}},
    ):
        assert not validator.is_valid(broken), broken


def test_vendor_core_schema_is_closed() -> None:
    good = _step().model_dump(mode="json")
    core = vendor.mova_validator(CORE)
    assert core.is_valid(good)
    assert not core.is_valid({**good, "severity": "low"})
    assert not core.is_valid({**good, "meta": {}})
    assert not core.is_valid({**good, "result_status": "succeeded"})
    assert not core.is_valid({**good, "started_at": None})
    assert not core.is_valid(_refusal().model_dump(mode="json"))


def test_unknown_vendor_schema_name_is_refused() -> None:
    with pytest.raises(KeyError):
        vendor.mova_schema("ds.nothing_v1")


# --- against upstream's own files (skipped without ../shared) ---------------------------------


def _plain(node: Any, defs: dict[str, Any]) -> Any:
    """``node`` without descriptions and with our local ``#/$defs/...`` references inlined."""
    if isinstance(node, list):
        return [_plain(item, defs) for item in node]
    if not isinstance(node, dict):
        return node
    ref = node.get("$ref", "")
    if ref.startswith("#/$defs/"):
        return _plain(defs[ref.removeprefix("#/$defs/")], defs)
    return {k: _plain(v, defs) for k, v in node.items() if k != "description"}


@pytest.mark.parametrize(
    ("name", "ours_at"),
    [(CORE, "episode_fields"), (SECURITY, "security_fields")],
)
def test_vendor_schemas_say_what_upstream_says_but_the_closure(
    upstream: Upstream, name: str, ours_at: str
) -> None:
    """Same fields, types, formats, enums, patterns and required lists as upstream's
    closed branch (``allOf[1]``); only where the closure is written differs."""
    theirs = json.loads((upstream.root / "schemas" / f"{name}.schema.json").read_text("utf-8"))
    ours: dict[str, Any] = dict(vendor.mova_schema(name))
    assert ours["$id"] == theirs["$id"]
    branch = theirs["allOf"][1]
    assert branch["additionalProperties"] is False
    assert ours["unevaluatedProperties"] is False
    defs = ours["$defs"]
    assert _plain(defs[ours_at], defs) == _plain(
        {k: v for k, v in branch.items() if k != "additionalProperties"}, {}
    )


@pytest.mark.parametrize("name", sorted(CORE_EPISODES))
def test_core_episodes_validate_against_upstream_as_is(upstream: Upstream, name: str) -> None:
    assert upstream.errors(CORE_EPISODES[name]().model_dump(mode="json")) == []


@pytest.mark.parametrize("code", list(ErrorCode), ids=lambda c: c.value)
def test_security_episodes_conform_to_upstream(upstream: Upstream, code: ErrorCode) -> None:
    for ep in (_refusal(code), _refusal(code, run_id=None, profile_id="p", profile_version="1")):
        assert upstream.errors(ep.model_dump(mode="json")) == []


def test_the_upstream_check_still_catches_mistakes(upstream: Upstream) -> None:
    good = _refusal().model_dump(mode="json")
    assert upstream.errors(good) == []
    assert upstream.errors({**good, "surprise": 1})
    assert upstream.errors({**good, "actions_taken": [{"action_type": "refuse"}]})
    assert upstream.errors({**good, "security_event_type": "made_up"})
    assert upstream.errors({**good, "security_model_version": "2.0.0"})
    assert upstream.errors({**_step().model_dump(mode="json"), "episode_type": "step/x"})
    assert upstream.errors({**_step().model_dump(mode="json"), "episode_type": "execution/"})
    # And upstream's own schema, as published, refuses even a good security episode.
    published = jsonschema.Draft202012Validator(
        {"$ref": "https://mova.dev/schemas/ds.security_event_episode_core_v1.schema.json"},
        registry=upstream.registry,
    )
    assert not published.is_valid(good)
