"""A 405 names every method its path takes (``Allow``, RFC 9110 §10.2.1), on every
path the app serves, those that several routes share included (the probes' ``GET``
and ``HEAD``, the dashboard's sign-in page and form). No database: a method is
refused by routing, before any dependency."""

from __future__ import annotations

import re
from collections import defaultdict

from fastapi.testclient import TestClient

from shim.api import create_app
from shim.api.http import served_routes
from shim.settings import ShimSettings

_PARAM = re.compile(r"\{[^}]+\}")
_ASKED = ("PUT", "PATCH", "DELETE", "TRACE", "POST", "GET")


def test_every_405_names_every_method_of_its_path() -> None:
    app = create_app(ShimSettings.from_env({}))
    taken: defaultdict[str, set[str]] = defaultdict(set)
    for route in served_routes(app):
        taken[str(getattr(route, "path", ""))].update(getattr(route, "methods", None) or ())
    client = TestClient(app)
    checked = shared = 0
    for path, methods in sorted(taken.items()):
        if not methods:
            continue  # a mount (the static files) takes what its app takes
        method = next(m for m in _ASKED if m not in methods)
        url = _PARAM.sub(lambda m: "run_" + "0" * 32 if "run" in m[0] else "0" * 64, path)
        r = client.request(method, url)
        assert r.status_code == 405, (method, path, r.status_code)
        allowed = {m.strip() for m in r.headers["allow"].split(",")}
        assert allowed == methods, (path, r.headers["allow"])
        checked += 1
        shared += len([r for r in served_routes(app) if getattr(r, "path", "") == path]) > 1
    assert checked > 40
    assert shared >= 3  # /healthz, /readyz, /dashboard/login
