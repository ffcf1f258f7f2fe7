"""The per-run hash chain over the ledger: intact runs verify; a tampered row is named."""

from __future__ import annotations

import json

import pytest

from tests.support.stack import Stack


def _succeeded_run(stack: Stack) -> str:
    run_id = str(
        stack.submit({"recipe": "echo", "objective": "chain", "parameters": {"k": 1}}).json()[
            "run_id"
        ]
    )
    card = stack.wait(run_id, {"waiting_approval"})["plan_card"]
    stack.client.post(f"/approve/{run_id}", json={"plan_digest": card["plan_digest"]})
    assert stack.wait(run_id, {"succeeded", "failed"})["status"] == "succeeded"
    return run_id


def _verify(stack: Stack, run_id: str) -> dict[str, object]:
    r = stack.client.get(f"/runs/{run_id}/ledger/verify", headers=stack.auth("olga"))
    assert r.status_code == 200, r.text
    out: dict[str, object] = r.json()
    return out


def test_an_intact_run_verifies(stack: Stack) -> None:
    run_id = _succeeded_run(stack)
    report = _verify(stack, run_id)
    rows = stack.sql(
        "SELECT chain_seq, prev_hash, entry_hash FROM calls WHERE run_id = :r ORDER BY chain_seq",
        r=run_id,
    )
    anchored = report["anchored"]
    assert isinstance(anchored, dict)
    # held to two checkpoints of the run's end: the database's and the anchor file's
    # (unsigned: this stack's worker has no signing key)
    assert anchored == {"checkpoints": 2, "entries": 2, "signed": 0, "sources": anchored["sources"]}
    assert len(anchored["sources"]) == 2
    assert report == {
        "run_id": run_id, "entries": 2, "ok": True, "head": rows[1][2], "first_broken": None,
        "anchored": anchored,
    }  # fmt: skip
    assert [r[0] for r in rows] == [1, 2]
    assert rows[0][1] == "0" * 64 and rows[1][1] == rows[0][2]
    assert (
        stack.client.get(f"/runs/{run_id}/ledger/verify", headers=stack.auth("sam")).status_code
        == 403
    )


@pytest.mark.parametrize(
    ("column", "value", "reason"),
    [
        (
            "response_json",
            json.dumps({"ok": True, "forged": 1}),
            "the stored response does not match its digest",
        ),
        ("status", "failed", "entry_hash does not match the entry"),
        ("prev_hash", "1" * 64, "prev_hash is not the previous entry's hash"),
        ("chain_seq", "7", "chain_seq 7 where 2 was expected"),
    ],
)
def test_a_tampered_row_is_named(stack: Stack, column: str, value: str, reason: str) -> None:
    run_id = _succeeded_run(stack)
    victim = stack.sql("SELECT op_key FROM calls WHERE run_id = :r AND step_id = 'echo'", r=run_id)[
        0
    ][0]
    stack.execute(f"UPDATE calls SET {column} = :v WHERE op_key = :k", v=value, k=victim)
    report = _verify(stack, run_id)
    assert report["ok"] is False
    assert report["first_broken"] == {
        "op_key": victim,
        "chain_seq": 7 if column == "chain_seq" else 2,
        "reason": reason,
    }
