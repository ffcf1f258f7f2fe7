"""A replay holds a run to the rules of its time, on SQLite and PostgreSQL.

A worker keeps every profile, tool pool and recipe version it runs with, by the
digest runs record. After the files change (here: the catalog answers with edited
versions, as after an edit and a restart), a finished run still replays
identically under the versions it ran under; asked for today's rules, the replay
reports the change as a policy_digest divergence. A run whose versions were never
kept (recorded before they were) falls back to today's files and says so.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from contracts import PolicyProfile, ToolPool, sha256_hex
from ledger import open_database
from policies import catalog
from policies.catalog import Loaded
from tests.conftest import require_backend
from tests.support.stack import BACKENDS, Stack, running_stack
from worker.replay import replay_run
from worker.runtime import runtime


@pytest.fixture(params=BACKENDS)
def stack(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Stack]:
    require_backend(request.param)
    with running_stack(request.param, tmp_path_factory.mktemp("rules")) as s:
        yield s


def _edited(monkeypatch: pytest.MonkeyPatch) -> None:
    """The catalog as after someone edited the default profile and tool pool."""
    profile = catalog.profile("default")
    pool = catalog.tool_pool("default")
    new_profile = profile.model.model_copy(update={"description": "edited after the run"})
    new_pool = pool.model.model_copy(update={"description": "edited after the run"})

    def loaded(model: Any) -> Loaded[Any]:
        text = model.model_dump_json()
        return Loaded(model, sha256_hex(text.encode()), text)

    edited_profile: Loaded[PolicyProfile] = loaded(new_profile)
    edited_pool: Loaded[ToolPool] = loaded(new_pool)
    monkeypatch.setattr(catalog, "profile", lambda _id: edited_profile)
    monkeypatch.setattr(catalog, "tool_pool", lambda _id: edited_pool)


def test_a_run_replays_under_the_rules_it_ran_under(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_id = stack.finished_run(2, "rules")
    kept = stack.sql("SELECT kind, policy_id FROM policy_versions ORDER BY kind, policy_id")
    assert ("profile", "default") in kept and ("tool_pool", "default") in kept
    assert ("recipe", "echo") in kept

    _edited(monkeypatch)
    db = open_database(stack.database_url)
    try:
        same = replay_run(db, runtime().settings, run_id)
        assert same.match and same.rules == "recorded", same
        today = replay_run(db, runtime().settings, run_id, "current")
    finally:
        db.dispose()
    assert not today.match and today.rules == "current"
    assert [d.kind for d in today.divergences] == ["policy_digest"]

    # the same through the API, as an operator asks for it
    r = stack.client.post(f"/runs/{run_id}/replay")
    assert r.status_code == 200 and r.json()["match"] is True, r.text
    r = stack.client.post(f"/runs/{run_id}/replay", params={"rules": "current"})
    assert r.status_code == 200 and r.json()["match"] is False, r.text
    assert r.json()["divergences"][0]["kind"] == "policy_digest"
    bad = stack.client.post(f"/runs/{run_id}/replay", params={"rules": "someday"})
    assert bad.status_code == 422, bad.text


def test_a_run_whose_versions_were_never_kept_is_held_to_todays_files(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_id = stack.finished_run(2, "rules")
    stack.execute("DELETE FROM policy_versions")
    _edited(monkeypatch)
    db = open_database(stack.database_url)
    try:
        report = replay_run(db, runtime().settings, run_id)
    finally:
        db.dispose()
    assert not report.match and report.divergences[0].kind == "policy_digest"
