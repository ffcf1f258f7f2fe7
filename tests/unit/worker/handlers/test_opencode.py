"""The pure parts of the OpenCode executor: scripts, policy, narrowing,
snapshots, the ban, the gate's input check and the evidence built from turns."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from contracts import (
    ErrorCode,
    GatehouseError,
    OpencodePolicy,
    PlanStep,
    SecurityEpisode,
)
from policies import catalog
from policies.executor_evidence import executor_episodes
from policies.gate import check_step
from worker.handlers.opencode import workspace
from worker.handlers.opencode.ban import parent_of, refuse_parent
from worker.handlers.opencode.config import server_config
from worker.handlers.opencode.runner import narrow
from worker.scripted_model import ScriptError, load_script, pick_reply
from worker.scripted_model.script import EXHAUSTED


def _chat(*messages: tuple[str, Any]) -> dict[str, Any]:
    return {"messages": [{"role": role, "content": content} for role, content in messages]}


def test_a_sequence_script_plays_in_order_and_repeats_the_last() -> None:
    script = load_script({"replies": [{"content": "one"}, {"content": {"two": 2}}]})
    assert [pick_reply(script, n, {}).text for n in range(3)] == ["one", '{"two":2}', '{"two":2}']


def test_a_turn_script_follows_the_conversation() -> None:
    script = load_script(
        {
            "turns": [
                {
                    "match": "WRITE",
                    "replies": [{"tool_calls": [{"name": "write"}]}, {"content": "ok"}],
                },
                {"replies": [{"content": "anything"}]},
            ]
        }
    )
    first = pick_reply(
        script, 0, _chat(("system", "s"), ("user", [{"type": "text", "text": "WRITE x"}]))
    )
    assert first.tool_calls[0].name == "write"
    after_tool = _chat(("user", "WRITE x"), ("assistant", None), ("tool", "done"))
    assert pick_reply(script, 1, after_tool).text == "ok"
    done = _chat(("user", "WRITE x"), ("assistant", None), ("tool", "r"), ("assistant", "ok"))
    assert pick_reply(script, 2, done).text == EXHAUSTED  # the agent loop ends
    assert pick_reply(script, 3, _chat(("user", "other"))).text == "anything"


@pytest.mark.parametrize(
    "bad",
    [
        {"replies": [], "turns": []},
        {"replies": [{"content": "x", "status": 500}]},
        {"replies": [{"body": "x"}]},
        {"replies": [{}]},
        {"turns": [{"match": "x", "replies": []}]},
        {"replies": [{"content": "x", "surprise": 1}]},
    ],
)
def test_bad_scripts_are_refused_up_front(bad: Any) -> None:
    with pytest.raises(ScriptError):
        load_script(bad)


def test_a_script_file_that_is_not_json_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    path.write_text("{nope")
    with pytest.raises(ScriptError):
        load_script(path)


def test_every_permission_class_is_explicit_and_task_is_denied() -> None:
    policy = OpencodePolicy()
    assert policy.permissions["task"] == "deny"
    with pytest.raises(ValidationError, match="task"):
        OpencodePolicy(permissions={**policy.permissions, "task": "allow"})
    rules = dict(policy.permissions)
    del rules["doom_loop"]
    with pytest.raises(ValidationError, match="doom_loop"):
        OpencodePolicy(permissions=rules)
    config = server_config("http://127.0.0.1:1/v1", "m", None, policy)
    assert config["permission"] == {**policy.permissions, "task": "deny"}
    assert config["model"] == "gatehouse/m"


def test_the_narrowed_prompt_is_the_first_subgoal() -> None:
    assert narrow("Do A. Then B.", ["only A"]).endswith("\nonly A")
    assert narrow("Do A. Then B.\nAnd C.", []).endswith("\nDo A.")


def test_a_snapshot_puts_the_workspace_back_byte_for_byte(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_bytes(b"a")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.txt").write_bytes(b"b")
    before = workspace.take(tmp_path)
    before.save(tmp_path.parent / "snap.json")
    (tmp_path / "a.txt").write_bytes(b"changed")
    (tmp_path / "new").mkdir()
    (tmp_path / "new" / "c.txt").write_bytes(b"c")
    (tmp_path / "sub" / "b.txt").unlink()
    after = workspace.take(tmp_path)
    assert after.digest != before.digest
    assert [c["path"] for c in workspace.changes(before, after)] == [
        "a.txt",
        "new/c.txt",
        "sub/b.txt",
    ]
    loaded = workspace.load(tmp_path.parent / "snap.json")
    assert loaded is not None
    workspace.restore(tmp_path, loaded)
    assert workspace.take(tmp_path).digest == before.digest
    assert workspace.load(tmp_path / "missing.json") is None


def test_the_ban_refuses_parent_ids_and_spots_children() -> None:
    assert refuse_parent({"title": "t"}) == {"title": "t"}
    with pytest.raises(GatehouseError) as refused:
        refuse_parent({"title": "t", "parentID": "ses_1"})
    assert refused.value.code is ErrorCode.CHILD_SESSION_REFUSED
    child: dict[str, Any] = {
        "type": "session.created",
        "properties": {"info": {"id": "ses_2", "parentID": "ses_1"}},
    }
    assert parent_of(child) == "ses_1"
    assert parent_of({"type": "session.created", "properties": {"info": {"id": "ses_3"}}}) is None
    assert parent_of({"type": "session.updated", "properties": child["properties"]}) is None


def _oc_step(step_input: dict[str, Any]) -> PlanStep:
    return PlanStep.model_validate(
        {
            "step_id": "s",
            "verb": "edit",
            "connector_id": "workspace-opencode",
            "driver_kind": "opencode",
            "input": step_input,
        }
    )


def test_the_gate_checks_an_opencode_step_input() -> None:
    pool = catalog.tool_pool("default").model
    profile = catalog.profile("opencode").model
    ok: dict[str, Any] = {"prompt": "p", "subgoals": ["a"]}
    assert check_step(_oc_step(ok), ok, pool, profile).connector_id == "workspace-opencode"
    bads: list[dict[str, Any]] = [
        {"subgoals": []},
        {"prompt": "p", "shell": "rm"},
        {"prompt": "p", "subgoals": [1]},
    ]
    for bad in bads:
        with pytest.raises(GatehouseError) as refused:
            check_step(_oc_step(bad), bad, pool, profile)
        assert refused.value.code is ErrorCode.PLAN_INVALID
    with pytest.raises(GatehouseError) as refused:
        check_step(_oc_step(ok), ok, pool, catalog.profile("default").model)
    assert refused.value.code is ErrorCode.DRIVER_NOT_ALLOWED


def test_evidence_has_an_episode_per_activity_and_security_for_refusals() -> None:
    turn: dict[str, Any] = {
        "activity": [
            {"kind": "permission", "permission": "bash", "decision": "reject", "request_id": "p1"},
            {"kind": "tool", "tool": "bash", "status": "error", "call_id": "c1"},
            {"kind": "file", "path": "a.txt", "before": None, "after": "ab" * 32},
            {"kind": "child_session", "session_id": "ses_x"},
        ],
        "diagnostics": {"reason": "quiet"},
    }
    output: dict[str, Any] = {
        "ladder": [{"op_key": "k1" * 32, "attempt": 1, "error_code": "oc_stalled", "output": turn}]
    }
    built = executor_episodes(
        run_id="r",
        step_id="s",
        op_key="k2" * 32,
        output=output,
        executor_id="w",
        recorded_at="2026-01-01T00:00:00Z",
    )
    types = [e.episode_type for e in built]
    assert types == [
        "security_event/permission_denied",
        "execution/opencode_tool",
        "execution/opencode_file",
        "security_event/child_session_refused",
        "execution/opencode_stall",
        "execution/timeout_ladder",
    ]
    assert sum(isinstance(e, SecurityEpisode) for e in built) == 2
    again = executor_episodes(
        run_id="r",
        step_id="s",
        op_key="k2" * 32,
        output=output,
        executor_id="w",
        recorded_at="2026-01-02T00:00:00Z",
    )
    assert [e.episode_id for e in built] == [e.episode_id for e in again]  # stored once
    assert len({e.episode_id for e in built}) == len(built)
