"""A run's other records (decisions, endorsements, plan revisions, edits, its cancel,
its own row, calls left in doubt) are held to its checkpoint: each one deleted, each
field of each one changed, and a row added afterwards is named by ``ledger verify``.

The families come from ``ledger.run_records.FAMILIES``, and the run built here must
hold a row of every one: a family added there and not here fails the first test.
A seal kept in its own row cannot notice that row deleted; the checkpoint, in the
database and in the anchor file, does. Both databases, no worker: the rows are
written as the ledger writes them, then the checkpoint a run's end records.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import sqlalchemy as sa
from sqlalchemy import text as sql

from contracts import JsonObject, digest_of
from ledger import Database, anchors, chain, chain_verify, run_records
from ledger.run_records import FAMILIES, Family
from tests.support.rows import new_run

RUN, PARENT = "run_records", "run_records_parent"
T = "2026-12-01T00:00:00.000000+00:00"


def _rows(db: Database) -> None:
    """One row of every family for RUN: an edit of PARENT's plan, two revisions, an
    endorsement and the decision completing the quorum, a cancel, a call on the chain
    and one left in doubt; then the run's end and its checkpoint."""
    new_run(db, PARENT)
    new_run(db, RUN)
    plan: JsonObject = {"steps": [{"step_id": "s1"}]}
    with db.engine.begin() as conn:
        x = conn.execute
        x(sql("INSERT INTO plan_edits (run_id, parent_run_id, previous_digest, edited_by,"
              " edited_at) VALUES (:r, :p, :d, 'bob', :t)"),
          {"r": RUN, "p": PARENT, "d": "1" * 64, "t": T})  # fmt: skip
        for n in (1, 2):
            x(sql("INSERT INTO plan_revisions (run_id, revision, plan_json, plan_digest,"
                  " previous_digest, changes_json, created_at) VALUES (:r, :n, :j, :d, :p,"
                  " :c, :t)"),
              {"r": RUN, "n": n, "j": json.dumps({**plan, "n": n}),
               "d": digest_of({**plan, "n": n}), "p": str(n) * 64, "c": '["s1"]',
               "t": T})  # fmt: skip
        digest = digest_of({**plan, "n": 2})
        x(sql("INSERT INTO plan_endorsements (run_id, plan_digest, endorsed_by, comment,"
              " endorsed_at) VALUES (:r, :d, 'carol', 'fine', :t)"),
          {"r": RUN, "d": digest, "t": T})  # fmt: skip
        decision: JsonObject = {
            "approval_id": "apr_1", "run_id": RUN, "plan_digest": digest,
            "decision": "approved", "decided_by": "ann", "comment": "ok", "decided_at": T,
        }  # fmt: skip
        sealed, sealed_hash = chain.seal_decision(decision)
        x(sql("INSERT INTO plan_approvals (approval_id, run_id, plan_digest, decision,"
              " decided_by, comment, decided_at, sealed_json, sealed_hash) VALUES (:approval_id,"
              " :run_id, :plan_digest, :decision, :decided_by, :comment, :decided_at, :s, :h)"),
          {**decision, "s": sealed, "h": sealed_hash})  # fmt: skip
        x(sql("INSERT INTO run_cancels (run_id, requested_by, reason, source, requested_at,"
              " observed_at) VALUES (:r, 'alice', 'enough', 'gatehouse', :t, '@finish')"),
          {"r": RUN, "t": T})  # fmt: skip
        for key, status in (("op_done", "completed"), ("op_doubt", "in_doubt")):
            x(sql("INSERT INTO calls (op_key, run_id, step_id, attempt, kind, target, status,"
                  " request_json, request_digest, started_at) VALUES (:k, :r, 's1', 1, 'http',"
                  " 'https://example.test/', :s, '{}', :d, :t)"),
              {"k": key, "r": RUN, "s": status, "d": digest_of({}), "t": T})  # fmt: skip
        chain.append(conn, "op_done", RUN)
        x(sql("UPDATE runs SET status = 'cancelled', plan_digest = :d,"
              " error_code = 'run_cancelled', error_message = 'cancelled by alice',"
              " finished_at = :t, profile_digest = :p,"
              " tool_pool_digest = :p, trace_digest = :p, random_seed = 'seed',"
              " parent_run_id = :parent, fork_from_step = 2 WHERE run_id = :r"),
          {"d": digest, "t": T, "p": "2" * 64, "parent": PARENT, "r": RUN})  # fmt: skip


def _checkpoint(db: Database, anchor_file: Path) -> None:
    """The run's end: its checkpoint in the database and in the anchor file."""
    with db.engine.begin() as conn:
        anchors.anchor_run(conn, RUN, "w1", None, anchor_file)


def _verify(db: Database, anchor_file: Path) -> JsonObject:
    """As ``GET /runs/{id}/ledger/verify`` does it."""
    with db.engine.connect() as conn:
        held = anchors.of_run(conn, RUN) + anchors.from_file(anchor_file, RUN)
        return chain_verify.verify(conn, RUN, held).to_json()


def _reason(report: JsonObject) -> str:
    assert report["ok"] is False, report
    broken = report["first_broken"]
    assert isinstance(broken, dict)
    return str(broken["reason"])


def _where(family: Family, key: tuple[object, ...]) -> tuple[str, dict[str, object]]:
    cond = " AND ".join(f"{k} = :k{i}" for i, k in enumerate(family.key))
    return cond, {f"k{i}": v for i, v in enumerate(key)}


def _committed(db: Database, family: Family) -> list[tuple[object, ...]]:
    """The keys of the family's rows the checkpoint committed to."""
    committed = f" AND {family.committed}" if family.committed else ""
    with db.engine.connect() as conn:
        return [
            tuple(r)
            for r in conn.execute(
                sql(f"SELECT {', '.join(family.key)} FROM {family.table}"
                    f" WHERE ({family.where}){committed}"),
                {"r": RUN},
            ).all()
        ]  # fmt: skip


def _reseal(db: Database) -> None:
    """Give every decision the seal of what it now says: the seal kept in the row is no
    help to an auditor whose attacker can write the row."""
    fields = ("approval_id", "run_id", "plan_digest", "decision", "decided_by", "comment",
              "decided_at")  # fmt: skip
    with db.engine.begin() as conn:
        for row in conn.execute(sql(f"SELECT {', '.join(fields)} FROM plan_approvals")).all():
            sealed, sealed_hash = chain.seal_decision(dict(zip(fields, row, strict=True)))
            conn.execute(
                sql("UPDATE plan_approvals SET sealed_json = :s, sealed_hash = :h"
                    " WHERE approval_id = :a"),
                {"s": sealed, "h": sealed_hash, "a": row[0]},
            )  # fmt: skip


@pytest.fixture
def anchor_file(db: Database, tmp_path: Path) -> Path:
    path = tmp_path / "anchors.jsonl"
    _rows(db)
    _checkpoint(db, path)
    return path


def test_every_family_has_a_committed_row_and_the_intact_run_verifies(
    db: Database, anchor_file: Path
) -> None:
    report = _verify(db, anchor_file)
    assert report["ok"] is True, report
    records = report["records"]
    assert isinstance(records, dict)
    checked = records["checked"]
    assert isinstance(checked, dict)
    assert set(checked) == {f.name for f in FAMILIES}
    empty = [f.name for f in FAMILIES if not checked[f.name]]
    assert empty == [], f"the run built here has no row of {empty}: add one to _rows"
    assert records["not_covered"] == [
        "not checked: episodes, artifacts, run events, plan cards, run steps"
    ]


def test_the_commitment_read_in_one_statement_is_the_families_read_one_by_one(
    db: Database, anchor_file: Path
) -> None:
    """A checkpoint's commitment is read in one statement (the rows as JSON); what a
    verification compares it with is read a family at a time. Both must digest every
    row alike, text (here with characters JSON escapes) and integers as they are."""
    with db.engine.begin() as conn:
        conn.execute(
            sql("UPDATE plan_approvals SET comment = :c WHERE run_id = :r"),
            {"c": 'ok \u00e9 "quoted" \\ \u2028 \U0001f600 \t', "r": RUN},
        )
    with db.engine.connect() as conn:
        one = run_records.commitment(conn, RUN)
        each = {f.name: run_records.rows_of(conn, RUN, f, committed=True) for f in FAMILIES}
    assert one == {"version": run_records.VERSION, **each}
    assert all(each.values())


@pytest.mark.parametrize("family", FAMILIES, ids=[f.name for f in FAMILIES])
def test_a_deleted_record_is_named(db: Database, anchor_file: Path, family: Family) -> None:
    keys = _committed(db, family)
    named = 0
    for key in keys:
        cond, params = _where(family, key)
        with db.engine.connect() as conn:
            saved = conn.execute(
                sql(f"SELECT * FROM {family.table} WHERE {cond}"), params
            ).mappings().first()  # fmt: skip
        assert saved is not None
        try:
            with db.engine.begin() as conn:
                conn.execute(sql(f"DELETE FROM {family.table} WHERE {cond}"), params)
        except sa.exc.IntegrityError:
            # the run's own row, which its decisions and revisions reference: the
            # database refuses to delete it, and without it there is no run to verify
            assert family.table == "runs", family
            continue
        named += 1
        report = _verify(db, anchor_file)
        reason = _reason(report)
        assert reason.startswith(f"{family.name}: the {family.table} row "), reason
        assert reason.endswith("was deleted"), reason
        # and the report does not say in the same breath that nothing commits to them
        records = report["records"]
        assert isinstance(records, dict) and records["checked"] is not None, records
        assert "no checkpoint" not in str(records["not_covered"]), records
        assert all(str(v) in reason for v in key), reason
        with db.engine.begin() as conn:  # put it back: the next row is checked alone
            cols = ", ".join(saved.keys())
            marks = ", ".join(f":{c}" for c in saved)
            conn.execute(
                sql(f"INSERT INTO {family.table} ({cols}) VALUES ({marks})"),
                dict(saved),
            )
        assert _verify(db, anchor_file)["ok"] is True
    assert keys, family.name  # the run built here has a row of the family
    # every row deleted was named; only the run's own row cannot be deleted at all
    assert named == (0 if family.table == "runs" else len(keys)), (family.name, named)


# Columns that name another table's row: the database refuses to point them elsewhere.
_REFERENCES = {"run_id", "intent_id"}


@pytest.mark.parametrize("family", FAMILIES, ids=[f.name for f in FAMILIES])
def test_each_field_of_a_record_changed_is_named(
    db: Database, anchor_file: Path, family: Family
) -> None:
    named: set[str] = set()
    skipped: set[str] = set()
    for key in _committed(db, family):
        cond, params = _where(family, key)
        for field in family.fields:
            with db.engine.connect() as conn:
                was = conn.execute(
                    sql(f"SELECT {field} FROM {family.table} WHERE {cond}"), params
                ).scalar_one()  # fmt: skip
            assert was is not None, f"give {family.table}.{field} a value in _rows"
            now = was + 1 if isinstance(was, int) else f"{was}~"
            try:
                with db.engine.begin() as conn:
                    conn.execute(
                        sql(f"UPDATE {family.table} SET {field} = :v WHERE {cond}"),
                        {**params, "v": now},
                    )
            except sa.exc.IntegrityError:
                skipped.add(field)  # a reference or key the database itself holds
                continue
            _reseal(db)
            reason = _reason(_verify(db, anchor_file))
            assert reason.startswith(f"{family.name}: the {family.table} row "), (field, reason)
            named.add(field)
            moved = field in family.key
            restore = {**params, **({f"k{family.key.index(field)}": now} if moved else {})}
            with db.engine.begin() as conn:
                conn.execute(
                    sql(f"UPDATE {family.table} SET {field} = :v WHERE {cond}"),
                    {**restore, "v": was},
                )
            _reseal(db)
            assert _verify(db, anchor_file)["ok"] is True, field
    # every field was changed and named, but those the database itself refuses to
    # change: a reference to another table's row, or part of the row's key
    assert skipped <= _REFERENCES | set(family.key), skipped
    assert named | skipped == set(family.fields), set(family.fields) - named - skipped
    assert named, family.name


def test_a_record_added_after_the_checkpoint_is_named(db: Database, anchor_file: Path) -> None:
    """A decision slipped in after the run ended (a laundered approval, sealed as the
    ledger would seal it) is named; a closed family admits no new row."""
    decision: JsonObject = {
        "approval_id": "apr_forged", "run_id": RUN, "plan_digest": "3" * 64,
        "decision": "approved", "decided_by": "mallory", "comment": None, "decided_at": T,
    }  # fmt: skip
    sealed, sealed_hash = chain.seal_decision(decision)
    with db.engine.begin() as conn:
        conn.execute(
            sql("INSERT INTO plan_approvals (approval_id, run_id, plan_digest, decision,"
                " decided_by, comment, decided_at, sealed_json, sealed_hash) VALUES"
                " (:approval_id, :run_id, :plan_digest, :decision, :decided_by, :comment,"
                " :decided_at, :s, :h)"),
            {**decision, "s": sealed, "h": sealed_hash},
        )  # fmt: skip
    reason = _reason(_verify(db, anchor_file))
    assert reason.startswith("decisions: the plan_approvals row approval_id=apr_forged was added")


def test_the_database_checkpoint_rewritten_is_still_caught_by_the_anchor_file(
    db: Database, anchor_file: Path
) -> None:
    """Deleting a decision and recomputing the database's checkpoint to match: the
    anchor file's copy, outside the database, still names it."""
    with db.engine.begin() as conn:
        conn.execute(sql("DELETE FROM plan_approvals WHERE run_id = :r"), {"r": RUN})
        conn.execute(sql("DELETE FROM chain_checkpoints WHERE run_id = :r"), {"r": RUN})
        anchors.record_checkpoint(conn, RUN, "w1", None)
    reason = _reason(_verify(db, anchor_file))
    assert "apr_1" in reason and "line 1, was deleted" in reason, reason


def test_a_run_checkpointed_before_the_commitment_says_what_it_does_not_cover(
    db: Database, tmp_path: Path
) -> None:
    """A checkpoint written before checkpoints committed to a run's other records: the
    run verifies as it did, and the report says a record deleted whole is not noticed."""
    _rows(db)
    with db.engine.begin() as conn:
        anchors.record_checkpoint(conn, RUN, "w1", None)
        body = json.loads(conn.execute(sql("SELECT body_json FROM chain_checkpoints")).scalar_one())
        del body["records"]
        conn.execute(sql("UPDATE chain_checkpoints SET body_json = :b"), {"b": json.dumps(body)})
        conn.execute(sql("DELETE FROM plan_endorsements WHERE run_id = :r"), {"r": RUN})
    report = _verify(db, tmp_path / "none.jsonl")
    assert report["ok"] is True, report
    records = report["records"]
    assert isinstance(records, dict) and records["checked"] is None
    said = records["not_covered"]
    assert isinstance(said, list) and str(said[0]).startswith(
        "no checkpoint of this run commits to its other records (decisions, endorsements,"
    ), said


@pytest.mark.parametrize("records", ["[]", '{"version": 9}', '{"version": 1}'])
def test_a_checkpoint_whose_commitment_cannot_be_read_breaks_the_run(
    db: Database, anchor_file: Path, records: str
) -> None:
    with db.engine.begin() as conn:
        body = json.loads(conn.execute(sql("SELECT body_json FROM chain_checkpoints")).scalar_one())
        body["records"] = json.loads(records)
        conn.execute(sql("UPDATE chain_checkpoints SET body_json = :b"), {"b": json.dumps(body)})
    reason = _reason(_verify(db, anchor_file))
    assert reason.startswith("the checkpoint at "), reason


def test_a_line_left_by_an_end_that_rolled_back_does_not_count(
    db: Database, tmp_path: Path
) -> None:
    """A run's end appends its checkpoint to the anchor file before its transaction
    commits. Rolled back (the worker died) and run again, it leaves a line for an end
    that never was: here the run had no cancel yet. Only the file's last line for the
    run vouches for its records; the run verifies."""
    path = tmp_path / "anchors.jsonl"
    _rows(db)
    with db.engine.begin() as conn:
        cancel = conn.execute(sql("SELECT * FROM run_cancels")).mappings().one()
        conn.execute(sql("DELETE FROM run_cancels"))
    with pytest.raises(RuntimeError), db.engine.begin() as conn:
        anchors.anchor_run(conn, RUN, "w1", None, path)
        raise RuntimeError("the worker died before its end committed")
    with db.engine.begin() as conn:  # the cancel arrives; the end runs again
        cols = ", ".join(cancel.keys())
        conn.execute(
            sql(f"INSERT INTO run_cancels ({cols}) VALUES ({', '.join(f':{c}' for c in cancel)})"),
            dict(cancel),
        )
    _checkpoint(db, path)
    assert len(path.read_text().splitlines()) == 2
    report = _verify(db, path)
    assert report["ok"] is True, report
    records = report["records"]
    assert isinstance(records, dict) and isinstance(records["checked"], dict)
    assert records["checked"]["cancels"] == 1
