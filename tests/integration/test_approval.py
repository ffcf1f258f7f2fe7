"""Approve and reject: digests, ordering, repeats, and runs that take no decision.

Every run a test starts ends terminal: a workflow left waiting in ``recv``
would hold up the module's worker shutdown.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

import contracts
from shim.local import InventoryService
from tests.support.stack import Stack


@pytest.fixture
def inventory() -> Iterator[InventoryService]:
    with InventoryService() as svc:
        yield svc


def echo_intent(mode: str = "full-cycle") -> dict[str, Any]:
    return {
        "recipe": "echo",
        "objective": "Echo for the approval tests",
        "parameters": {"nonce": uuid.uuid4().hex},
        "mode": mode,
        "submitted_by": "alice",
    }


def waiting_run(stack: Stack) -> tuple[str, str]:
    """A full-cycle echo run at its plan card: (run_id, plan_digest)."""
    r = stack.submit(echo_intent())
    assert r.status_code == 202, r.text
    run = stack.wait(r.json()["run_id"], {"waiting_approval", "failed"})
    assert run["status"] == "waiting_approval", run
    assert run["plan_card"]["status"] == "waiting_input"
    assert run["plan_digest"] == run["plan_card"]["plan_digest"]
    return run["run_id"], run["plan_card"]["plan_digest"]


def decide(stack: Stack, verb: str, run_id: str, digest: str, by: str = "bob") -> Any:
    """Decide as approver ``by`` (bob or ann): the token and decided_by name the same person."""
    return stack.client.post(
        f"/{verb}/{run_id}",
        json={"plan_digest": digest, "decided_by": by},
        headers=stack.auth(by),
    )


def error_code(r: Any) -> str:
    code: str = r.json()["error"]["code"]
    return code


def approvals(stack: Stack, run_id: str) -> list[tuple[Any, ...]]:
    return stack.sql(
        "SELECT plan_digest, decision, decided_by FROM plan_approvals WHERE run_id = :r",
        r=run_id,
    )


def test_reject_runs_nothing(stack: Stack) -> None:
    run_id, digest = waiting_run(stack)

    r = decide(stack, "reject", run_id, digest, by="ann")
    assert r.status_code == 200, r.text
    assert r.json() == {
        "run_id": run_id,
        "plan_digest": digest,
        "decision": "rejected",
        "decided_by": "ann",
        "recorded": True,
        "quorum": None,  # the profile needs one approver
    }

    done = stack.wait(run_id, {"rejected", "succeeded", "failed"})
    assert done["status"] == "rejected", done
    assert done["plan_card"]["status"] == "rejected"
    assert done["steps"] == []
    assert [(a["decision"], a["decided_by"]) for a in done["approvals"]] == [("rejected", "ann")]
    assert approvals(stack, run_id) == [(digest, "rejected", "ann")]
    # the planner's own ledger row only: no tool was called
    assert stack.sql("SELECT kind, step_id FROM calls WHERE run_id = :r", r=run_id) == [
        ("provider", "@compile")
    ]
    assert stack.sql("SELECT COUNT(*) FROM run_steps WHERE run_id = :r", r=run_id) == [(0,)]
    types = [
        e["episode_type"] for e in stack.client.get(f"/runs/{run_id}/episodes").json()["episodes"]
    ]
    assert "execution/approval" in types
    # no step executed; the run still ends with its summary, which says it was cancelled
    assert not any(
        t.startswith("execution/") and t not in ("execution/approval", "execution/run_summary")
        for t in types
    )
    summary = next(
        e
        for e in stack.client.get(f"/runs/{run_id}/episodes").json()["episodes"]
        if e["episode_type"] == "execution/run_summary"
    )
    assert summary["result_status"] == "cancelled"

    # after the run ended its plan keeps its answer: a repeat is a repeat, the
    # opposite is already_decided, and nothing new is written
    late = decide(stack, "reject", run_id, digest)
    assert late.status_code == 200, late.text
    assert late.json()["recorded"] is False
    late = decide(stack, "approve", run_id, digest)
    assert late.status_code == 409, late.text
    assert error_code(late) == "already_decided"
    # a digest nobody decided on is refused: the run takes no decision any more
    other = "0" * 64 if digest != "0" * 64 else "1" * 64
    late = decide(stack, "approve", run_id, other)
    assert late.status_code == 409, late.text
    assert error_code(late) == "run_not_awaiting_approval"
    assert approvals(stack, run_id) == [(digest, "rejected", "ann")]


def test_stale_digest_is_refused_and_writes_nothing(stack: Stack) -> None:
    run_id, digest = waiting_run(stack)
    wrong = "0" * 64 if digest != "0" * 64 else "1" * 64

    for verb in ("approve", "reject"):
        r = decide(stack, verb, run_id, wrong)
        assert r.status_code == 409, r.text
        err = r.json()["error"]
        assert err["code"] == "stale_plan_digest"
        assert err["details"] == {"given": wrong, "current": digest}
    assert approvals(stack, run_id) == []
    assert stack.run(run_id)["status"] == "waiting_approval"

    r = decide(stack, "approve", run_id, digest)
    assert r.status_code == 200, r.text
    assert r.json()["recorded"] is True
    done = stack.wait(run_id, {"succeeded", "failed", "rejected"})
    assert done["status"] == "succeeded", done
    assert approvals(stack, run_id) == [(digest, "approved", "bob")]


def test_malformed_digest_is_invalid_request(stack: Stack) -> None:
    run_id, digest = waiting_run(stack)
    for bad in ("ABC", digest.upper(), digest[:-1], digest + "0"):
        r = decide(stack, "approve", run_id, bad)
        assert r.status_code == 422, r.text
        assert error_code(r) == "invalid_request"
    assert approvals(stack, run_id) == []
    assert decide(stack, "reject", run_id, digest).status_code == 200
    assert stack.wait(run_id, {"rejected", "failed"})["status"] == "rejected"


def test_approval_before_the_wait_still_counts(stack: Stack, inventory: InventoryService) -> None:
    plan = {
        "objective": "Ping the inventory service",
        "steps": [
            {
                "step_id": "hello",
                "verb": "note",
                "connector_id": "note",
                "driver_kind": "noop",
                "input": {"message": "about to ping"},
            },
            {
                "step_id": "ping",
                "verb": "fetch",
                "connector_id": "local-http",
                "driver_kind": "http",
                "input": {"method": "GET", "url": f"{inventory.base_url}/status"},
            },
        ],
    }
    digest = contracts.digest_of(contracts.Plan.model_validate(plan).model_dump(mode="json"))
    body = echo_intent(mode="run-plan") | {"plan": plan}

    r = stack.submit(body)
    assert r.status_code == 202, r.text
    run_id = r.json()["run_id"]
    a = decide(stack, "approve", run_id, digest, by="ann")  # no polling first
    assert a.status_code == 200, a.text
    assert a.json()["recorded"] is True
    assert a.json()["plan_digest"] == digest

    done = stack.wait(run_id, {"succeeded", "failed", "rejected"})
    assert done["status"] == "succeeded", done
    assert done["plan_digest"] == digest
    assert done["plan_card"]["plan_digest"] == digest
    assert done["plan_card"]["status"] == "approved"
    assert [(s["step_id"], s["status"]) for s in done["steps"]] == [
        ("hello", "succeeded"),
        ("ping", "succeeded"),
    ]
    assert approvals(stack, run_id) == [(digest, "approved", "ann")]
    assert inventory.count("/status") == 1


class HeldService:
    """A loopback endpoint that answers only once released: holds a run in its execute phase."""

    def __init__(self) -> None:
        self.arrived = threading.Event()
        self.release = threading.Event()
        outer = self

        class _Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                return

            def do_GET(self) -> None:
                outer.arrived.set()
                outer.release.wait(timeout=8)
                body = b'{"held":true}'
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/held"

    def step(self, step_id: str = "hold") -> dict[str, Any]:
        """A plan step that fetches this endpoint (so is held until released)."""
        return {
            "step_id": step_id,
            "verb": "fetch",
            "connector_id": "local-http",
            "driver_kind": "http",
            "input": {"method": "GET", "url": self.url},
        }

    def __enter__(self) -> HeldService:
        self.thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


def test_already_decided(stack: Stack) -> None:
    with HeldService() as held:
        plan = {
            "objective": "Hold the run in execute",
            "steps": [held.step()],
        }
        r = stack.submit(echo_intent(mode="run-plan") | {"plan": plan})
        assert r.status_code == 202, r.text
        run = stack.wait(r.json()["run_id"], {"waiting_approval", "failed"})
        assert run["status"] == "waiting_approval", run
        run_id, digest = run["run_id"], run["plan_digest"]

        first = decide(stack, "approve", run_id, digest)
        assert first.status_code == 200, first.text
        assert first.json()["recorded"] is True
        assert held.arrived.wait(timeout=30), "the approved run never reached its step"
        assert stack.run(run_id)["status"] == "running"

        # the same decision again: answered, not recorded; the author on record stays
        again = decide(stack, "approve", run_id, digest, by="ann")
        assert again.status_code == 200, again.text
        assert again.json()["recorded"] is False
        assert again.json()["decided_by"] == "bob"
        # the opposite decision: refused, naming the decision on record
        flip = decide(stack, "reject", run_id, digest, by="ann")
        assert flip.status_code == 409, flip.text
        assert error_code(flip) == "already_decided"
        assert flip.json()["error"]["details"] == {"decision": "approved", "decided_by": "bob"}
        held.release.set()

        done = stack.wait(run_id, {"succeeded", "failed", "rejected"})
    assert done["status"] == "succeeded", done
    assert approvals(stack, run_id) == [(digest, "approved", "bob")]
    assert [(a["decision"], a["decided_by"]) for a in done["approvals"]] == [("approved", "bob")]


def test_plan_only_takes_no_decision(stack: Stack) -> None:
    r = stack.submit(echo_intent(mode="plan-only"))
    assert r.status_code == 202, r.text
    run_id = r.json()["run_id"]
    done = stack.wait(run_id, {"planned", "failed"})
    assert done["status"] == "planned", done
    card = done["plan_card"]
    assert card is not None and card["status"] == "planned"
    assert done["plan_digest"] == card["plan_digest"]

    for verb in ("approve", "reject"):
        r = decide(stack, verb, run_id, card["plan_digest"])
        assert r.status_code == 409, r.text
        assert error_code(r) == "run_not_awaiting_approval"
    assert approvals(stack, run_id) == []
    assert stack.run(run_id)["status"] == "planned"
    assert stack.sql("SELECT kind, step_id FROM calls WHERE run_id = :r", r=run_id) == [
        ("provider", "@compile")
    ]


@pytest.mark.parametrize("verb", ["approve", "reject"])
def test_unknown_and_malformed_run_ids(stack: Stack, verb: str) -> None:
    digest = "a" * 64
    unknown = "run_" + uuid.uuid4().hex
    r = decide(stack, verb, unknown, digest)
    assert r.status_code == 404, r.text
    assert error_code(r) == "run_not_found"

    for bad in ("run_123", "RUN_" + uuid.uuid4().hex, "run_" + uuid.uuid4().hex.upper(), "x" * 36):
        r = decide(stack, verb, bad, digest)
        assert r.status_code == 422, (bad, r.text)
        assert error_code(r) == "invalid_request"
    assert stack.sql("SELECT COUNT(*) FROM plan_approvals WHERE plan_digest = :d", d=digest) == [
        (0,)
    ]
