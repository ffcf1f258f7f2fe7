"""``gatehouse submit``: what it sends, and what it warns of after queueing a run (GET /readyz)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from contracts import JsonValue
from shim.cli import main
from shim.cli.commands.submit import STALE_QUEUE_S, submit_warnings


def test_submit_warns_of_no_worker_and_of_a_full_one() -> None:
    no_worker: dict[str, JsonValue] = {
        "checks": {"workers": {"ok": False, "reason": "no worker of version v"}},
        "queue": {"queued": 1, "oldest_queued_s": 0.1},
    }
    assert submit_warnings(False, no_worker) == ["no worker of version v"]
    live: dict[str, JsonValue] = {
        "checks": {"workers": {"ok": True, "live": 1}},
        "queue": {"queued": 1},
    }
    assert submit_warnings(True, live) == []
    fresh: JsonValue = {**live, "queue": {"queued": 2, "oldest_queued_s": 1.5}}
    assert submit_warnings(True, fresh) == []
    stale: JsonValue = {**live, "queue": {"queued": 5, "oldest_queued_s": STALE_QUEUE_S + 1}}
    [warning] = submit_warnings(True, stale)
    assert warning.startswith("5 run(s) queued") and "GATEHOUSE_WORKER_CONCURRENCY" in warning
    # waiting for people costs no slot since runs are split at decisions: not blamed
    assert "GATEHOUSE_WORKER_SHARE" in warning and "hold none" in warning
    assert submit_warnings(False, "not json") == []


def test_submit_sends_the_profile_the_pool_and_the_budgets(
    answered_by: Callable[[Callable[[httpx.Request], httpx.Response]], None],
    capsys: pytest.CaptureFixture[str],
) -> None:
    sent: list[dict[str, Any]] = []

    def answer(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/intent":
            sent.append(json.loads(request.content))
            run = {"run_id": "run_" + "d" * 32, "intent_id": "int_1", "status": "queued"}
            return httpx.Response(202, json={**run, "links": {}})
        return httpx.Response(200, json={"checks": {"workers": {"ok": True}}})

    answered_by(answer)
    argv = ["submit", "--recipe", "echo", "--objective", "o", "--url", "http://shim"]
    argv += ["--token", "gh_x", "--policy-profile", "strict", "--tool-pool", "ops"]
    argv += ["--budget", "max_steps=4", "--budget", "max_cost_usd=0.5"]
    with pytest.raises(SystemExit) as done:
        main(argv)
    assert done.value.code == 0, capsys.readouterr().err
    [intent] = sent
    assert intent["policy_profile"] == "strict" and intent["tool_pool"] == "ops"
    assert intent["budgets"] == {"max_steps": 4, "max_cost_usd": 0.5}


@pytest.mark.parametrize(
    ("given", "said"),
    [
        (["--budget", "max_stepz=4"], "the kinds are max_steps, max_model_turns"),
        (["--budget", "max_steps=x"], "not a number"),
        (["--budget", "max_cost_usd=inf"], "'inf' is not a number"),
        (["--budget", "max_steps=0"], "--budget max_steps=0: should be greater than or equal to 1"),
        (["--budget", "max_steps=2.5"], "max_steps=2.5: should be a valid integer"),
        (["--budget", "max_cost_usd=-1"], "max_cost_usd=-1: should be greater than 0"),
        (["--budget", "max_steps=2", "--budget", "max_steps=3"], "max_steps is given twice"),
        (["--policy-profile", "Strict Mode"], "--policy-profile 'Strict Mode': a name is"),
        (["--tool-pool", ""], "--tool-pool '': a name is lowercase letters"),
    ],
)
def test_a_bad_option_is_a_usage_error_before_anything_is_sent(
    given: list[str], said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["submit", "--recipe", "echo", "--objective", "o", "--token", "gh_x"]
    # no shim listens at this URL: a request would be exit 1 (cannot reach), not 2
    with pytest.raises(SystemExit) as done:
        main([*argv, "--url", "http://127.0.0.1:9", *given])
    assert done.value.code == 2
    assert said in " ".join(capsys.readouterr().err.split())


def test_a_budget_in_exponent_form_is_a_number(
    answered_by: Callable[[Callable[[httpx.Request], httpx.Response]], None],
    capsys: pytest.CaptureFixture[str],
) -> None:
    sent: list[dict[str, Any]] = []

    def answer(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/intent":
            sent.append(json.loads(request.content))
            run = {"run_id": "run_" + "d" * 32, "intent_id": "int_1", "status": "queued"}
            return httpx.Response(202, json={**run, "links": {}})
        return httpx.Response(200, json={"checks": {"workers": {"ok": True}}})

    answered_by(answer)
    argv = ["submit", "--recipe", "echo", "--objective", "o", "--url", "http://shim"]
    with pytest.raises(SystemExit) as done:
        main([*argv, "--token", "gh_x", "--budget", "max_cost_usd=1e2"])
    assert done.value.code == 0, capsys.readouterr().err
    assert sent[0]["budgets"] == {"max_cost_usd": 100.0}
