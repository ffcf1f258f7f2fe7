"""The door: rate limits, header limits and strict input, and refusals that repeat
counted on one row, so that a flood leaves a bounded number of rows.

Each test has its own shim (its own settings, the limits under test) on a fresh
database of each backend; no worker is needed, since nothing here is accepted.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from contracts import GatehouseError
from ledger import open_database
from shim.api.door import MAX_HEADER_BYTES, MAX_HEADERS, TokenBuckets
from shim.settings import Rate, parse_rate
from tests.support.stack import (
    ActingClient,
    drop_database,
    fresh_database_url,
    shim_client,
)

BAD = {"Authorization": "Bearer not-a-token"}
JSON = {"content-type": "application/json"}
RUN = "run_" + "0" * 32
NO_LIMITS = {"GATEHOUSE_RATE_PER_IDENTITY": "off", "GATEHOUSE_RATE_PER_ADDRESS": "off"}
# a window no test outlasts: every repeat falls in the first row's
LONG_WINDOW = {"GATEHOUSE_SECURITY_EVENT_WINDOW_S": "86400"}


@pytest.fixture
def url(backend: str, tmp_path: Path) -> Iterator[str]:
    made = fresh_database_url(backend, tmp_path)
    yield made
    drop_database(made)


@contextmanager
def shim(url: str, env: Mapping[str, str]) -> Iterator[ActingClient]:
    with shim_client(url, env={**LONG_WINDOW, **env}) as client:
        yield client


def sql(url: str, query: str) -> list[tuple[Any, ...]]:
    db = open_database(url)
    try:
        with db.engine.connect() as conn:
            return [tuple(r) for r in conn.execute(sa.text(query)).all()]
    finally:
        db.dispose()


def events(url: str) -> list[tuple[str, int]]:
    """(code, repeat_count) of each security_events row."""
    rows = sql(url, "SELECT error_code, repeat_count FROM security_events ORDER BY error_code")
    return [(str(c), int(n)) for c, n in rows]


def written(url: str) -> dict[str, int]:
    """Rows of the tables a request could write, security events aside."""
    return {t: sql(url, f"SELECT COUNT(*) FROM {t}")[0][0] for t in ("intents", "runs")}


def error_of(r: Any, code: str, status: int) -> dict[str, Any]:
    assert r.status_code == status, r.text
    err: dict[str, Any] = r.json()["error"]
    assert err["code"] == code, err
    return err


# --- rate limits ---------------------------------------------------------------


def test_rate_specs() -> None:
    assert parse_rate("20:100") == Rate(20.0, 100)
    assert parse_rate("20/s:100") == Rate(20.0, 100)
    assert parse_rate("4") == Rate(4.0, 20)
    assert parse_rate("0.5:2") == Rate(0.5, 2)
    assert parse_rate("off") is None
    assert parse_rate("0") is None
    for bad in ("fast", "-1:5", "5:0", "5:x", "inf"):
        with pytest.raises(GatehouseError, match=r"RATE|positive"):
            parse_rate(bad)


def test_token_bucket_refills_with_time() -> None:
    now = [0.0]
    buckets = TokenBuckets(Rate(2.0, 3), clock=lambda: now[0])
    assert [buckets.take("a") for _ in range(3)] == [0.0, 0.0, 0.0]
    assert buckets.take("a") == pytest.approx(0.5)  # one token comes in 0.5 s
    assert buckets.take("b") == 0.0  # another key has its own bucket
    now[0] += 0.5
    assert buckets.take("a") == 0.0
    assert buckets.take("a") > 0


def test_over_the_address_limit_is_429_with_retry_after(url: str) -> None:
    with shim(url, {"GATEHOUSE_RATE_PER_ADDRESS": "0.01:3"}) as client:
        answers = [client.get("/runs", headers=BAD) for _ in range(3)]
        assert [a.status_code for a in answers] == [401, 401, 401]  # refused ones count too
        r = client.get("/runs", headers=BAD)
        err = error_of(r, "rate_limited", 429)
        assert err["retryable"] is True
        assert r.headers["Retry-After"].isdigit() and int(r.headers["Retry-After"]) >= 1
        assert err["details"] == {"retry_after_s": int(r.headers["Retry-After"])}
        # every route, unknown ones included; /healthz is exempt
        assert client.get("/no-such-route", headers=BAD).status_code == 429
        assert client.post("/intent", json={}, headers={"Authorization": ""}).status_code == 429
        assert client.get("/healthz").status_code == 200
        # a caller with a valid token is limited by its identity, not by its address
        assert client.get("/runs").status_code == 200
    assert written(url) == {"intents": 0, "runs": 0}


def test_one_identitys_flood_does_not_shut_out_the_others_on_its_address(url: str) -> None:
    """Every local user is 127.0.0.1: sam's script hitting /recipes spends sam's tokens
    only; alice's submit and olga's reads still pass (the address bucket is tight)."""
    env = {"GATEHOUSE_RATE_PER_IDENTITY": "0.01:5", "GATEHOUSE_RATE_PER_ADDRESS": "0.01:5"}
    with shim(url, env) as client:
        sam = client.people.auth("sam")
        flood = [client.get("/recipes", headers=sam).status_code for _ in range(50)]
        assert flood[:5] == [200] * 5 and set(flood[5:]) == {429}
        assert client.get("/recipes").status_code == 200  # alice
        assert client.get("/runs", headers=client.people.auth("olga")).status_code == 200


def test_over_the_identity_limit_is_429_for_that_identity_only(url: str) -> None:
    env = {"GATEHOUSE_RATE_PER_IDENTITY": "0.01:2", "GATEHOUSE_RATE_PER_ADDRESS": "off"}
    with shim(url, env) as client:
        assert [client.get("/runs").status_code for _ in range(2)] == [200, 200]
        err = error_of(client.get("/runs"), "rate_limited", 429)
        assert "alice" in err["message"]
        # another identity, and requests with no valid token, have their own (or none)
        assert client.get("/runs", headers=client.people.auth("olga")).status_code == 200
        assert client.get("/runs", headers=BAD).status_code == 401
        assert client.get("/runs", headers={"Authorization": ""}).status_code == 401
        assert client.get("/runs", headers={"Authorization": "Basic eDp5"}).status_code == 401


def test_limits_can_be_off(url: str) -> None:
    with shim(url, NO_LIMITS) as client:
        assert {client.get("/runs").status_code for _ in range(300)} == {200}


# --- a flood leaves a bounded number of rows -----------------------------------


def _flood(url: str, env: Mapping[str, str], n: int) -> list[tuple[str, int]]:
    with shim(url, env) as client:
        for _ in range(n):
            client.get("/runs", headers=BAD)
        for _ in range(3):  # a few other refusals of the same kind: the same row
            client.get(f"/runs/{RUN}", headers=BAD)
    # the shim has stopped: what the door held is written
    return events(url)


@pytest.mark.parametrize("n", [300, 1000])
def test_an_unauthorized_flood_is_one_row_per_kind(url: str, n: int) -> None:
    """No limits: every refusal reaches its route and is counted on its kind's row
    (code, address, identity, route template): rows do not grow with the flood."""
    assert sorted(_flood(url, NO_LIMITS, n)) == [("unauthorized", 3), ("unauthorized", n)]


@pytest.mark.parametrize("n", [300, 3000])
def test_a_rate_limited_flood_is_counted_not_written(url: str, n: int) -> None:
    """A tight address limit: a few 401s, then 429s; the 429s are counted in the shim
    and written together. The rows are the same for 300 and 3,000 requests."""
    found = _flood(url, {"GATEHOUSE_RATE_PER_ADDRESS": "0.0001:5"}, n)
    assert sorted(found) == [("rate_limited", 3), ("rate_limited", n - 5), ("unauthorized", 5)]
    assert written(url) == {"intents": 0, "runs": 0}


def test_security_events_route_shows_the_count(url: str) -> None:
    with shim(url, NO_LIMITS) as client:
        for _ in range(7):
            client.get("/runs", headers=BAD)
        listed = client.get("/security-events").json()["security_events"]
    assert len(listed) == 1
    event = listed[0]
    # the row's facts in result_details: the served episode stays a MOVA episode
    assert event["result_details"]["repeat_count"] == 7
    assert event["result_details"]["last_seen_at"] >= event["recorded_at"]
    assert "repeat_count" not in event and "last_seen_at" not in event
    assert event["result_details"]["address"] == "testclient"
    assert event["result_details"]["route"] == "GET /runs"
    by_category = sql(url, "SELECT category, events, event_rows FROM v_security_by_category")
    assert by_category == [("auth", 7, 1)]


def test_a_new_window_opens_a_new_row(url: str) -> None:
    with shim(url, {**NO_LIMITS, "GATEHOUSE_SECURITY_EVENT_WINDOW_S": "0.000001"}) as client:
        for _ in range(3):
            client.get("/runs", headers=BAD)
    assert sum(n for _, n in events(url)) == 3
    assert len(events(url)) >= 2  # (a window this short is over by the next request)


# --- header limits and strict input ---------------------------------------------


@pytest.mark.parametrize(
    "headers",
    [
        {f"x-h{i}": "v" for i in range(MAX_HEADERS + 1)},
        {"x-long": "v" * (MAX_HEADER_BYTES + 1)},
        {f"x-h{i}": "v" * 6000 for i in range(3)},  # each fine, together too much
    ],
    ids=["too-many", "one-too-long", "too-long-together"],
)
def test_headers_too_large_is_431(url: str, headers: dict[str, str]) -> None:
    with shim(url, NO_LIMITS) as client:
        r = client.post("/intent", content=b"{}", headers={**JSON, **headers})
        error_of(r, "headers_too_large", 431)
        assert client.get("/runs").status_code == 200  # within the limits: served
    assert written(url) == {"intents": 0, "runs": 0}
    assert events(url) == [("headers_too_large", 1)]


RAW: list[tuple[str, bytes, str]] = [
    ("utf-16", json.dumps({"recipe": "echo"}).encode("utf-16"), "invalid_json"),
    ("bom", b'\xef\xbb\xbf{"recipe": "echo"}', "invalid_json"),
    ("latin-1", '{"recipe": "caf\u00e9"}'.encode("latin-1"), "invalid_json"),
    ("lone-surrogate", b'{"recipe": "echo", "objective": "a\\ud800b"}', "invalid_json"),
    ("surrogate-key", b'{"recipe": "echo", "parameters": {"\\udc00": 1}}', "invalid_json"),
]


@pytest.mark.parametrize(("raw", "code"), [c[1:] for c in RAW], ids=[c[0] for c in RAW])
def test_bodies_that_are_not_utf8_text_are_400(url: str, raw: bytes, code: str) -> None:
    with shim(url, NO_LIMITS) as client:
        error_of(client.post("/intent", content=raw, headers=JSON), code, 400)
    assert written(url) == {"intents": 0, "runs": 0}


POSTS = [
    f"/approve/{RUN}",
    f"/reject/{RUN}",
    f"/runs/{RUN}/cancel",
    f"/runs/{RUN}/messages",
    f"/runs/{RUN}/fork",
    "/calls/" + "0" * 64 + "/resolve",
]


@pytest.mark.parametrize("media", ["text/plain", "application/x-www-form-urlencoded", None])
def test_json_routes_refuse_other_media_types(url: str, media: str | None) -> None:
    headers = {"content-type": media} if media else {}
    with shim(url, NO_LIMITS) as client:
        for path in POSTS:
            # each as one who may use the route: the media type is looked at next
            who = (
                "bob"
                if path.startswith(("/approve", "/reject")) or path.endswith("/fork")
                else "alice"
            )
            r = client.post(path, content=b"{}", headers=headers | client.people.auth(who))
            error_of(r, "unsupported_media_type", 415)
    assert written(url) == {"intents": 0, "runs": 0}
