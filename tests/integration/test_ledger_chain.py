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
    sources = anchored["sources"]
    assert isinstance(sources, list) and len(sources) == 2 and "the database" in sources
    # counted in each place apart: the database's count is an evidence bundle's
    assert anchored == {"checkpoints": 2, "entries": 2, "signed": 0, "sources": sources,
                        "by_source": dict.fromkeys(sources, 1)}  # fmt: skip
    records = report["records"]
    assert isinstance(records, dict)
    # the run's other records, each held to its checkpoints' commitment
    assert records["checked"] == {
        "decisions": 1, "endorsements": 0, "revisions": 1, "edits": 0, "cancels": 0, "run": 1,
        "unchained_calls": 0,
    }  # fmt: skip
    assert report == {
        "run_id": run_id, "entries": 2, "ok": True, "head": rows[1][2], "first_broken": None,
        "anchored": anchored, "unsealed": 0, "records": records,
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
        (
            "status",
            "failed",
            'status was changed after it was sealed (sealed "completed", now "failed")',
        ),
        (
            "finished_at",
            "2020-01-01T00:00:00.000000+00:00",
            "finished_at was changed after it was sealed",
        ),
        (
            "resolved_by",
            "mallory",
            'resolved_by was changed after it was sealed (sealed null, now "mallory")',
        ),
        ("duration_ms", "987654321", "duration_ms was changed after it was sealed"),
        ("sealed_json", "{}", "entry_hash does not match the entry's sealed copy"),
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
    broken = report["first_broken"]
    assert isinstance(broken, dict)
    assert str(broken.pop("reason")).startswith(reason), report
    assert broken == {"op_key": victim, "chain_seq": 7 if column == "chain_seq" else 2}


def test_a_column_and_its_sealed_copy_edited_together_break_the_hash(stack: Stack) -> None:
    """Editing what the verifier compares against as well: the hash over the copy breaks."""
    run_id = _succeeded_run(stack)
    victim, sealed = stack.sql(
        "SELECT op_key, sealed_json FROM calls WHERE run_id = :r AND step_id = 'echo'", r=run_id
    )[0]
    forged = {**json.loads(sealed), "finished_at": "2020-01-01T00:00:00.000000+00:00"}
    stack.execute(
        "UPDATE calls SET finished_at = :t, sealed_json = :j WHERE op_key = :k",
        t=forged["finished_at"],
        j=json.dumps(forged),
        k=victim,
    )
    report = _verify(stack, run_id)
    assert report["first_broken"] == {
        "op_key": victim,
        "chain_seq": 2,
        "reason": "entry_hash does not match the entry's sealed copy",
    }


@pytest.mark.parametrize(
    ("column", "value"),
    [("decided_by", "mallory"), ("decided_at", "2020-01-01T00:00:00.000000+00:00"),
     ("plan_digest", "0" * 64), ("comment", "looks fine")],
)  # fmt: skip
def test_an_edited_decision_is_named(stack: Stack, column: str, value: str) -> None:
    run_id = _succeeded_run(stack)
    (approval_id,) = stack.sql(
        "SELECT approval_id FROM plan_approvals WHERE run_id = :r", r=run_id
    )[0]
    stack.execute(f"UPDATE plan_approvals SET {column} = :v WHERE run_id = :r", v=value, r=run_id)
    report = _verify(stack, run_id)
    broken = report["first_broken"]
    assert isinstance(broken, dict) and report["ok"] is False
    assert broken["op_key"] is None and broken["chain_seq"] is None
    assert str(broken["reason"]).startswith(
        f"decision {approval_id}: {column} was changed after it was sealed"
    ), broken


def test_a_decision_and_its_sealed_copy_edited_together_break_its_hash(stack: Stack) -> None:
    run_id = _succeeded_run(stack)
    approval_id, sealed = stack.sql(
        "SELECT approval_id, sealed_json FROM plan_approvals WHERE run_id = :r", r=run_id
    )[0]
    forged = json.dumps({**json.loads(sealed), "decided_by": "mallory"})
    stack.execute(
        "UPDATE plan_approvals SET decided_by = 'mallory', sealed_json = :j WHERE run_id = :r",
        j=forged,
        r=run_id,
    )
    broken = _verify(stack, run_id)["first_broken"]
    assert broken == {
        "op_key": None,
        "chain_seq": None,
        "reason": f"decision {approval_id}: sealed_hash does not match its sealed copy",
    }


def test_a_decision_recorded_with_no_seal_is_counted_not_hidden(stack: Stack) -> None:
    """A release before sealing, running beside a migrated schema (a rolling upgrade),
    records decisions with no seal: the chain still verifies, and the report says how
    many entries and decisions carry no seal, so an auditor sees what is not covered."""
    run_id = _succeeded_run(stack)
    stack.execute(
        "UPDATE plan_approvals SET sealed_json = NULL, sealed_hash = NULL WHERE run_id = :r",
        r=run_id,
    )
    report = _verify(stack, run_id)
    assert report["ok"] is True and report["unsealed"] == 1, report


@pytest.mark.parametrize(
    ("table", "family"), [("plan_approvals", "decisions"), ("plan_revisions", "revisions")]
)
def test_a_deleted_record_of_a_finished_run_breaks_it(
    stack: Stack, table: str, family: str
) -> None:
    """The examiner's reproduction: a finished run's approval deleted outright, which no
    seal in the row can notice; the run's checkpoint committed to it. (Every family,
    each field, on rows written directly: tests/integration/test_ledger_records.py.)"""
    run_id = _succeeded_run(stack)
    stack.execute(f"DELETE FROM {table} WHERE run_id = :r", r=run_id)
    report = _verify(stack, run_id)
    assert report["ok"] is False, report
    broken = report["first_broken"]
    assert isinstance(broken, dict)
    reason = str(broken["reason"])
    assert reason.startswith(f"{family}: the {table} row ") and "was deleted" in reason, reason
