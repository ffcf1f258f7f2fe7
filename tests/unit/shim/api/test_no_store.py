"""``Cache-Control: no-store`` on every answer of the app, without a database.

The app runs with a stand-in for its service, so each route that needs the
database fails: its answer is the 500 of Starlette's outermost error middleware,
the one answer an ordinary middleware never sees. The routes are taken from the
app's own table (``tests.support.walk``), so a route added later is walked too;
the answers with data (200s, a finished event stream, artifacts) are walked on
both databases in tests/integration/test_edge_headers.py.
"""

from __future__ import annotations

from pathlib import Path

from fastapi.testclient import TestClient

from shim.api import create_app
from shim.api.services import Service
from shim.settings import ShimSettings
from tests.support.stack import GENEROUS_LIMITS, People
from tests.support.walk import every_request


class _NoService(Service):
    """A ``Service`` with nothing in it: every route that uses it raises (it has no
    database, no settings), as a broken one would."""

    def __init__(self) -> None:  # no database opened, nothing set
        pass

    def close(self) -> None:
        pass


def _no_service(_settings: ShimSettings) -> Service:
    return _NoService()


def test_every_answer_is_no_store_even_a_500(tmp_path: Path) -> None:
    people = People(tmp_path)
    settings = ShimSettings.from_env(
        {
            "GATEHOUSE_DATABASE_URL": f"sqlite:///{tmp_path / 'unused.sqlite'}",
            "GATEHOUSE_TOKENS_FILE": str(people.file),
            **GENEROUS_LIMITS,
        }
    )
    app = create_app(settings, service_factory=_no_service)
    statuses: set[int] = set()
    missing: list[str] = []
    values = {"run_id": "run_" + "0" * 32, "sha256": "0" * 64, "name": "style.css"}
    with TestClient(app, raise_server_exceptions=False, follow_redirects=False) as client:
        for ask in every_request(app, values):
            for headers in ({}, people.auth("alice"), {"Authorization": "Bearer wrong"}):
                r = client.request(ask.method, ask.url, headers=headers, json={})
                statuses.add(r.status_code)
                if r.headers.get("cache-control") != "no-store":
                    missing.append(f"{ask.method} {ask.path} {r.status_code}")
        # an unknown route, a wrong method, a refused query parameter
        for method, url in (("GET", "/no-such"), ("DELETE", "/runs"), ("GET", "/runs?limt=5")):
            r = client.request(method, url, headers=people.auth("alice"))
            statuses.add(r.status_code)
            if r.headers.get("cache-control") != "no-store":
                missing.append(f"{method} {url} {r.status_code}")
    assert not missing, missing
    # the walk met the answers it is meant to: success, refusals, and the 500
    assert {200, 404, 405, 422, 500} <= statuses, statuses
