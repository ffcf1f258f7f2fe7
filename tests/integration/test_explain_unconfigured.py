"""Explain with no model configured: a clear refusal, never a made-up report.

Its own module because it needs a worker without GATEHOUSE_MODEL_BASE_URL
(the shared ``stack``), while ``test_explain.py`` runs one with the scripted
model, and only one worker runs in a test process at a time.
"""

from __future__ import annotations

from tests.support.stack import Stack


def test_no_model_is_explain_unavailable(stack: Stack) -> None:
    r = stack.submit({"recipe": "echo", "objective": "plan only", "mode": "plan-only"})
    assert r.status_code == 202, r.text
    run_id = r.json()["run_id"]
    assert stack.wait(run_id, {"planned", "failed"})["status"] == "planned"
    r = stack.client.get(f"/runs/{run_id}/explain")
    assert r.status_code == 503, r.text
    error = r.json()["error"]
    assert error["code"] == "explain_unavailable" and error["retryable"] is True
    assert "GATEHOUSE_MODEL_BASE_URL" in error["message"]
    # nothing was called, so nothing is in the ledger or the evidence
    calls = stack.client.get(f"/runs/{run_id}/ledger").json()["calls"]
    assert [c["step_id"] for c in calls] == ["@compile"]
    episodes = stack.client.get(f"/runs/{run_id}/episodes").json()["episodes"]
    assert "execution/explain" not in [e["episode_type"] for e in episodes]
    # and it is not a refusal of the request: no security event for it
    events = stack.client.get("/security-events").json()["security_events"]
    assert not [e for e in events if e["episode_type"] == "security_event/explain_unavailable"]
