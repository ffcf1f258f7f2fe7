"""A recipe whose planner no live worker can run is refused at submit, not later."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from ledger import Database, executors
from shim.api.services.health import planner_missing
from tests.support.stack import Stack

VERSION = "gatehouse-test"


def _beat(db: Database, name: str, age_s: float, planners: tuple[str, ...] | None) -> None:
    at = (datetime.now(UTC) - timedelta(seconds=age_s)).isoformat(timespec="milliseconds")
    with db.engine.begin() as conn:
        executors.heartbeat(
            conn,
            executor_id=name,
            app_version=VERSION,
            hostname="h",
            pid=1,
            now=at.replace("+00:00", "Z"),
            planners=planners or (),
        )
        if planners is None:  # an older worker: it does not say what it can run
            conn.exec_driver_sql(
                f"UPDATE executors SET planners = NULL WHERE executor_id = '{name}'"
            )


def _missing(db: Database, planner: str = "model") -> str | None:
    found = planner_missing(db, VERSION, 6.0, "model-plan", planner)
    return None if found is None else found.code.value


def test_no_live_worker_is_no_reason_to_refuse(db: Database) -> None:
    assert _missing(db) is None  # nobody yet: the intent waits for a worker
    _beat(db, "gone", 60, ("template",))
    assert _missing(db) is None  # only a dead one


def test_live_workers_without_the_planner_refuse_it(db: Database) -> None:
    _beat(db, "w1", 0, ("template",))
    _beat(db, "w2", 1, ("template", "opencode"))
    found = planner_missing(db, VERSION, 6.0, "model-plan", "model")
    assert found is not None and found.code.value == "planner_unavailable"
    assert found.details == {"recipe": "model-plan", "planner": "model", "live_workers": 2}
    assert "GATEHOUSE_MODEL_BASE_URL" in found.message
    assert _missing(db, "opencode") is None  # w2 can
    assert _missing(db, "template") is None


def test_one_capable_or_silent_worker_is_enough(db: Database) -> None:
    _beat(db, "w1", 0, ("template",))
    _beat(db, "old", 0, None)
    assert _missing(db) is None  # the older worker may have a model
    _beat(db, "old", 0, ("template", "model"))
    assert _missing(db) is None


def test_submit_refuses_a_model_recipe_when_no_worker_has_a_model(stack: Stack) -> None:
    """The stack's worker has no GATEHOUSE_MODEL_BASE_URL; its heartbeat says so."""
    (planners,) = stack.sql("SELECT planners FROM executors")[0:1]
    assert planners[0] == "template" or planners[0].startswith("template,"), planners
    before = stack.sql("SELECT COUNT(*) FROM runs")[0][0]
    r = stack.submit({"recipe": "model-plan", "objective": "plan something"})
    assert r.status_code == 503, r.text
    error = r.json()["error"]
    assert error["code"] == "planner_unavailable"
    assert error["details"]["planner"] == "model"
    assert stack.sql("SELECT COUNT(*) FROM runs")[0][0] == before  # nothing was written
    # a template recipe needs no planner from a worker
    ok = stack.submit({"recipe": "echo", "objective": "echo", "mode": "plan-only"})
    assert ok.status_code == 202, ok.text
    stack.wait(ok.json()["run_id"], {"planned"})
