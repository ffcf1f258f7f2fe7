"""A request that reaches the app outside its lifespan (before it started, or while it
stops: a restart's long poll still in flight) is answered 503 ``shim_unavailable``,
retryable, so a client's wait rides it out as it does a shim that is away; it was a
500 (``internal_error``), which ended the wait."""

from __future__ import annotations

from fastapi.testclient import TestClient

from shim.api import create_app
from shim.client import ApiError
from shim.settings import ShimSettings


def test_a_request_outside_the_lifespan_is_503_and_retryable() -> None:
    client = TestClient(create_app(ShimSettings.from_env({})))  # no `with`: no lifespan
    r = client.get("/runs/run_" + "0" * 32, headers={"Authorization": "Bearer gh_x"})
    assert r.status_code == 503, r.text
    error = r.json()["error"]
    assert (error["code"], error["retryable"]) == ("shim_unavailable", True)
    # and the client takes it for a refusal to send again
    assert ApiError(503, r.json()).retryable
