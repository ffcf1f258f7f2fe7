"""Runs the one-workflow shape started finish after the upgrade to split runs.

The release before runs were split (``BEFORE_SPLIT``) kept each run in one
DBOS workflow that waited in place for every decision. Its shim and worker
(real processes, that commit's code) leave three runs on disk: one waiting for
approval, one mid-plan (its step held by the callee), one in ``needs_operator``
(an unkeyed call interrupted by kill -9). Then this release's shim takes over,
and, under the same executor id, a worker of the application version those
workflows run under (gatehouse-5: this release is gatehouse-6, whose calls are
no DBOS steps, so it cannot resume them; the last release of gatehouse-5
does), beside a worker of this release: the approval, the operator's
resolution and the callee's answer arrive, and every run ends succeeded on the
old version's worker, each call once, each replaying under this release to its
trace digest.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy as sa

from contracts import APP_VERSION
from ledger import open_database
from shim.local import InventoryService, free_port, start_shim, start_worker, stop, wait_healthy
from tests.integration.test_approval import HeldService
from tests.support.old_release import LAST_OF_GATEHOUSE_5, old_release
from tests.support.plans import digest_of_plan
from tests.support.stack import GENEROUS_LIMITS, People, shim_client, wait_for_status

# The last commit whose runs waited in place (one workflow per run).
BEFORE_SPLIT = "4caa67c8105704dad949731d8a21284696c478b8"
EXECUTOR = "upgrade-w"
OLD_VERSION = "gatehouse-5"  # what both old releases run under


def _get(url: str, step_id: str, connector: str = "local-http") -> dict[str, Any]:
    return {
        "step_id": step_id,
        "verb": "fetch",
        "connector_id": connector,
        "driver_kind": "http",
        "input": {"url": url},
    }


class _Old:
    """The old release's shim, over HTTP."""

    def __init__(self, base: str, people: People) -> None:
        self.http = httpx.Client(base_url=base, timeout=30)
        self.people = people

    def submit(self, steps: list[dict[str, Any]]) -> tuple[str, str]:
        plan = {"objective": "from the old release", "steps": steps}
        body = {"recipe": "echo", "objective": "old", "mode": "run-plan", "plan": plan}
        r = self.http.post("/intent", json=body, headers=self.people.auth("alice"))
        assert r.status_code == 202, r.text
        return str(r.json()["run_id"]), digest_of_plan(plan)

    def approve(self, run_id: str, digest: str) -> None:
        r = self.http.post(
            f"/approve/{run_id}", json={"plan_digest": digest}, headers=self.people.auth("bob")
        )
        assert r.status_code == 200, r.text

    def read(self, run_id: str) -> dict[str, Any]:
        r = self.http.get(f"/runs/{run_id}", headers=self.people.auth("alice"))
        assert r.status_code == 200, r.text
        out: dict[str, Any] = r.json()
        return out


@pytest.mark.slow
def test_runs_of_the_one_workflow_shape_finish_after_the_upgrade(
    db_url: str, tmp_path: Path
) -> None:
    old = old_release(tmp_path, BEFORE_SPLIT)
    people = People(tmp_path)
    ws = tmp_path / "ws"
    base = f"http://127.0.0.1:{free_port()}"
    with InventoryService() as inventory, HeldService() as held:
        unkeyed = f"{inventory.base_url}/inventory.json"
        shim = start_shim(
            db_url,
            int(base.rsplit(":", 1)[1]),
            tmp_path / "old-shim.log",
            people.file,
            extra_env=dict(GENEROUS_LIMITS),
            cwd=old.tree,
            protocol="h11",  # the old release has no protocol module of this one's
        )
        procs = [shim]
        try:
            wait_healthy(base, shim)
            api = _Old(base, people)
            # in doubt: the unkeyed call sent, then kill -9 before it was recorded
            doubt, d_digest = api.submit([_get(unkeyed, "target", "local-http-unkeyed")])
            api.approve(doubt, d_digest)
            crashing = start_worker(
                db_url,
                EXECUTOR,
                ws,
                tmp_path / "old-a.log",
                {**old.worker_env(), "GATEHOUSE_CRASH_POINT": "after_effect:target"},
            )
            assert crashing.wait(timeout=90) == 137, (tmp_path / "old-a.log").read_text()
            worker = start_worker(db_url, EXECUTOR, ws, tmp_path / "old-b.log", old.worker_env())
            procs.append(worker)
            read = api.read
            assert wait_for_status(read, doubt, {"needs_operator"}, 90)["phase"] == "operator"
            # finished under the old release: its entries are chained in the old form
            early, e_digest = api.submit([_get(unkeyed, "early", "local-http")])
            wait_for_status(read, early, {"waiting_approval"}, 90)
            api.approve(early, e_digest)
            assert (
                wait_for_status(read, early, {"succeeded", "failed"}, 90)["status"] == "succeeded"
            )
            waiting, w_digest = api.submit([_get(unkeyed, "only", "local-http")])
            wait_for_status(read, waiting, {"waiting_approval"}, 90)
            moving, m_digest = api.submit([_get(held.url, "hold"), _get(unkeyed, "after")])
            api.approve(moving, m_digest)
            assert held.arrived.wait(timeout=60), "the approved run never reached its held step"
        finally:
            stop(procs)
        # on disk now: three runs of the old shape, each one workflow, none finished
        with shim_client(db_url, people=people) as client:  # this release: migrates
            for run_id in (doubt, waiting, moving):
                assert client.get(f"/runs/{run_id}").json()["status"] != "succeeded"
            drainer = old_release(tmp_path, LAST_OF_GATEHOUSE_5)
            worker = start_worker(
                db_url, EXECUTOR, ws, tmp_path / "old-c.log", drainer.worker_env()
            )
            beside = start_worker(db_url, "upgrade-new", ws, tmp_path / "new.log")
            try:

                def now(rid: str) -> dict[str, Any]:
                    out: dict[str, Any] = client.get(f"/runs/{rid}").json()
                    return out

                ok = client.post(f"/approve/{waiting}", json={"plan_digest": w_digest})
                assert ok.status_code == 200, ok.text
                [call] = [
                    c
                    for c in client.get(f"/runs/{doubt}/ledger").json()["calls"]
                    if c["status"] == "in_doubt"
                ]
                resolved = client.post(
                    f"/calls/{call['op_key']}/resolve",
                    json={"outcome": "applied", "note": "the callee's log shows it"},
                    headers=people.auth("olga"),
                )
                assert resolved.status_code == 200, resolved.text
                held.release.set()
                for run_id in (doubt, waiting, moving):
                    done = wait_for_status(now, run_id, {"succeeded", "failed"}, 90)
                    assert done["status"] == "succeeded", done
                    replayed = client.post(f"/runs/{run_id}/replay", headers=people.auth("olga"))
                    assert replayed.status_code == 200, replayed.text
                    assert replayed.json()["match"] is True, replayed.json()
            finally:
                stop([worker, beside])
            _sealed_by_the_migration(client, people, db_url, early)
        # each call once: the in-doubt one applied, the others completed
        # doubt, early's, waiting's, moving's "after"
        assert inventory.count("/inventory.json") == 4
    # one workflow each, as they began: never split, never run twice
    table = "workflow_status" if db_url.startswith("sqlite") else "dbos.workflow_status"
    for run_id in (doubt, waiting, moving):
        assert _sql(db_url, "SELECT stretch FROM runs WHERE run_id = :r", r=run_id) == [(None,)]
        found = _sql(
            db_url,
            f"SELECT workflow_uuid, status, application_version FROM {table}"
            " WHERE workflow_uuid LIKE :p",
            p=f"{run_id}%",
        )
        assert found == [(run_id, "SUCCESS", OLD_VERSION)], found
        assert APP_VERSION != OLD_VERSION


def _sealed_by_the_migration(client: Any, people: People, db_url: str, run_id: str) -> None:
    """The entries the old release chained keep their hash (version 1: checkpoints
    hold them) and got a sealed copy from the migration: the run verifies, and an
    edit to an old entry's time is named."""

    def verify() -> dict[str, Any]:
        r = client.get(f"/runs/{run_id}/ledger/verify", headers=people.auth("olga"))
        assert r.status_code == 200, r.text
        out: dict[str, Any] = r.json()
        return out

    assert verify()["ok"] is True
    forms = _sql(
        db_url,
        "SELECT op_key, chain_version, sealed_json IS NOT NULL FROM calls"
        " WHERE run_id = :r AND chain_seq IS NOT NULL ORDER BY chain_seq",
        r=run_id,
    )
    old_entries = [key for key, version, copied in forms if version is None and copied]
    assert old_entries and all(copied for _, _, copied in forms), forms
    db = open_database(db_url)
    try:
        with db.engine.begin() as conn:
            conn.execute(
                sa.text("UPDATE calls SET finished_at = '2020-01-01' WHERE op_key = :k"),
                {"k": old_entries[0]},
            )
    finally:
        db.dispose()
    broken = verify()["first_broken"]
    assert broken["op_key"] == old_entries[0], broken
    assert broken["reason"].startswith("finished_at was changed after it was sealed"), broken


def _sql(url: str, query: str, **params: Any) -> list[tuple[Any, ...]]:
    db = open_database(url)
    try:
        with db.engine.connect() as conn:
            return [tuple(r) for r in conn.execute(sa.text(query), params).all()]
    finally:
        db.dispose()
