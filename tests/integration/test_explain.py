"""Explain, in real runs on both databases, against the scripted model on loopback.

A finished run is explained through the ledger: the first model answer is not
a report (``explain_invalid``, recorded as a failed call), the next ask is a new
attempt that gets one; asking again is served from the ledger with no request
to the model, and so is a replay under the network guard, with the same text.
The report stays on the ``human_ui`` channel: its text is in no episode and in
no run view, and every explain episode is a MOVA 4.1.1 episode.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from contracts import ErrorCode, validate_instance
from ledger import open_database
from tests.conftest import require_backend
from tests.integration.test_text_channels import channel_of
from tests.support.guard import network_guard
from tests.support.mova import load_upstream, vendor_errors
from tests.support.scripted_model import ScriptedModel
from tests.support.stack import BACKENDS, Stack, running_stack

MARKER = f"report-{uuid.uuid4().hex[:8]}"
REPORT: dict[str, Any] = {
    "headline": f"The echo run succeeded ({MARKER})",
    "summary": "The plan had one noop step; bob approved it and it ran once.",
    "steps": [{"step_id": "echo", "note": "recorded the parameters as a note"}],
    "concerns": [],
}


# Each test plays its own answers (ScriptedModel.play_turns): the first test's first
# answer is prose, not a report; every later one is the report.
PROSE_FIRST: list[Any] = [{"content": "The run went fine, nothing to add."}, {"content": REPORT}]
REPORTS: list[Any] = [{"content": REPORT}]


@pytest.fixture(scope="module", params=BACKENDS)
def model_stack(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Stack, ScriptedModel]]:
    require_backend(request.param)
    with (
        ScriptedModel(REPORTS) as model,
        running_stack(
            request.param,
            tmp_path_factory.mktemp("explain"),
            {
                "GATEHOUSE_MODEL_BASE_URL": model.base_url,
                "GATEHOUSE_MODEL_NAME": "scripted",
                "RANDOM_SEED": "explain-seed",
            },
        ) as stack,
    ):
        yield stack, model


def _finished_run(stack: Stack) -> str:
    body = {"recipe": "echo", "objective": "note the parameters", "parameters": {"n": 1}}
    r = stack.submit({**body, "mode": "full-cycle"})
    assert r.status_code == 202, r.text
    run_id = str(r.json()["run_id"])
    waiting = stack.wait(run_id, {"waiting_approval", "failed"})
    assert waiting["status"] == "waiting_approval", waiting
    # Not finished yet: nothing to explain.
    r = stack.client.get(f"/runs/{run_id}/explain")
    assert r.status_code == 409 and r.json()["error"]["code"] == "run_not_finished", r.text
    digest = waiting["plan_card"]["plan_digest"]
    r = stack.client.post(f"/approve/{run_id}", json={"plan_digest": digest})
    assert r.status_code == 200, r.text
    assert stack.wait(run_id, {"succeeded", "failed"})["status"] == "succeeded"
    return run_id


def _explain_rows(stack: Stack, run_id: str) -> list[dict[str, Any]]:
    calls = stack.client.get(f"/runs/{run_id}/ledger").json()["calls"]
    return [c for c in calls if c["step_id"] == "@explain"]


def test_explain_through_the_ledger(
    model_stack: tuple[Stack, ScriptedModel], shared_dir: Path | None
) -> None:
    stack, model = model_stack
    model.play_turns(PROSE_FIRST)
    before = len(model.requests)  # what other tests of this module asked
    run_id = _finished_run(stack)
    assert len(model.requests) == before  # the run asked the model nothing (a template recipe)

    # 1: the model answers prose: explain_invalid, recorded as a failed provider call
    r = stack.client.get(f"/runs/{run_id}/explain")
    assert r.status_code == 502, r.text
    assert r.json()["error"]["code"] == ErrorCode.EXPLAIN_INVALID.value
    assert len(model.requests) == before + 1
    (failed,) = _explain_rows(stack, run_id)
    assert failed["kind"] == "provider" and failed["target"] == "openai_compat"
    assert failed["status"] == "failed" and failed["error_code"] == "explain_invalid"
    assert failed["attempt"] == 1

    # 2: asking again is a new attempt, and the model writes a report
    r = stack.client.get(f"/runs/{run_id}/explain")
    assert r.status_code == 200, r.text
    first = r.json()
    assert first["report"] == REPORT and first["from_ledger"] is False
    assert first["attempt"] == 2 and first["model"] == "scripted"
    assert len(model.requests) == before + 2
    validate_instance("ds.gatehouse_explain_report_v1", first["report"], ErrorCode.EXPLAIN_INVALID)
    validate_instance("ds.gatehouse_explain_v1", first, ErrorCode.INTERNAL_ERROR)
    sent = model.requests[before + 1]
    assert sent.headers["idempotency-key"] == first["op_key"]
    body: Any = sent.body
    assert isinstance(body, dict) and body["temperature"] == 0
    assert body["response_format"]["json_schema"]["name"] == "gatehouse_explain_report_v1"
    # both attempts asked exactly the same question: the evidence did not move
    assert sent.body == model.requests[before].body
    rows = _explain_rows(stack, run_id)
    assert [(c["attempt"], c["status"]) for c in rows] == [(1, "failed"), (2, "completed")]
    assert rows[1]["op_key"] == first["op_key"]
    assert rows[1]["request_digest"] == first["request_digest"]

    # 3: asked again: the recorded report, no request to the model
    r = stack.client.get(f"/runs/{run_id}/explain")
    assert r.status_code == 200, r.text
    again = r.json()
    assert again["from_ledger"] is True
    assert {k: v for k, v in again.items() if k != "from_ledger"} == {
        k: v for k, v in first.items() if k != "from_ledger"
    }
    assert len(model.requests) == before + 2
    assert len(_explain_rows(stack, run_id)) == 2

    # 4: a replay from the ledger alone: same text, no connection anywhere
    from worker.explain import replay_explain
    from worker.runtime import runtime

    db = open_database(stack.database_url)
    try:
        with network_guard() as attempts:
            replayed = replay_explain(db, runtime().settings, run_id)
    finally:
        db.dispose()
    assert attempts == []
    assert replayed.report.model_dump(mode="json") == REPORT
    assert replayed.op_key == first["op_key"] and replayed.from_ledger is True
    assert len(model.requests) == before + 2

    # 5: the hash chain still holds with the explain entries on it
    verified = stack.client.get(f"/runs/{run_id}/ledger/verify").json()
    assert verified["ok"] is True, verified

    # 6: one episode per attempt, naming the report by digest, never quoting it
    episodes = stack.client.get(f"/runs/{run_id}/episodes").json()["episodes"]
    explains = [e for e in episodes if e["episode_type"] == "execution/explain"]
    assert sorted(e["result_status"] for e in explains) == ["completed", "failed"]
    done = next(e for e in explains if e["result_status"] == "completed")
    (ref,) = done["body"]["output_data_refs"]
    assert ref["sha256"] == first["report_digest"]
    bodies = [e["body"] for e in explains]
    assert all(vendor_errors(b) == [] for b in bodies), [vendor_errors(b) for b in bodies]
    if shared_dir is not None and (shared_dir / "mova-4.1.1").is_dir():
        upstream = load_upstream(shared_dir)
        assert all(upstream.errors(b) == [] for b in bodies), [upstream.errors(b) for b in bodies]

    # 7: channels: the report's text is human_ui, and only there
    assert first["text_channels"] == {"/report": "human_ui"}
    _assert_marker_only_under(first, "/report", "human_ui")
    assert MARKER not in str(episodes)
    assert MARKER not in str(stack.run(run_id))
    assert MARKER not in str(stack.client.get(f"/runs/{run_id}/ledger").json())


def _assert_marker_only_under(response: dict[str, Any], prefix: str, channel: str) -> None:
    found = 0

    def walk(value: Any, pointer: str) -> None:
        nonlocal found
        if isinstance(value, dict):
            for k, v in value.items():
                if not (pointer == "" and k == "text_channels"):
                    walk(v, f"{pointer}/{k}")
        elif isinstance(value, list):
            for i, v in enumerate(value):
                walk(v, f"{pointer}/{i}")
        elif isinstance(value, str) and MARKER in value:
            assert pointer.startswith(prefix), pointer
            assert channel_of(pointer, response["text_channels"]) == channel
            found += 1

    walk(response, "")
    assert found > 0


def test_explain_refuses_what_it_cannot_explain(model_stack: tuple[Stack, ScriptedModel]) -> None:
    stack, model = model_stack
    model.play_turns(REPORTS)
    r = stack.client.get("/runs/run_" + "0" * 32 + "/explain")
    assert r.status_code == 404 and r.json()["error"]["code"] == "run_not_found"
    # a submitter may explain only the runs it submitted
    run_id = _finished_run(stack)
    r = stack.client.get(f"/runs/{run_id}/explain", headers=stack.auth("sam"))
    assert r.status_code == 403 and r.json()["error"]["code"] == "forbidden"
    r = stack.client.get(f"/runs/{run_id}/explain", headers=stack.auth("olga"))
    assert r.status_code == 200, r.text
