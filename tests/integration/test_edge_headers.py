"""The edge on both databases: no answer cached, forwarded headers believed only from
configured proxies, and a cap on the event streams one identity holds open.

* ``Cache-Control: no-store`` on the answers that carry data: every route of the app
  (from its route table) asked anonymously, with a bearer token and with a dashboard
  session, about a finished run, its artifact and its event stream (read to its end).
  The answers without data, a 500 among them, are walked in
  tests/unit/shim/api/test_no_store.py.
* ``X-Forwarded-For`` from loopback, a new forged address on each request: without
  ``GATEHOUSE_TRUSTED_PROXIES`` the per-address limit holds and the security events
  name the real peer; with the peer named as a proxy, the header is the address.
* ``GATEHOUSE_MAX_EVENT_STREAMS``: one stream more than the cap is refused with 429 and
  ``Retry-After``, on a real shim (streams stay open); a closed stream, or a ``HEAD``
  that never streamed, gives its slot back.
"""

from __future__ import annotations

import json
import socket
import time
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import httpx
from fastapi import FastAPI
from fastapi.testclient import TestClient

from shim.api import create_app
from shim.local import free_port, start_shim, stop, wait_healthy
from shim.settings import ShimSettings
from tests.support.plans import ECHO, noop_plan
from tests.support.served import ServedShim
from tests.support.stack import ActingClient, Stack
from tests.support.walk import every_request

BAD = {"Authorization": "Bearer not-a-token"}
LOOPBACK = ("127.0.0.1", 41234)
# the security events of requests from loopback that forged X-Forwarded-For
ONLY_THE_PEER = {"unauthorized": {"127.0.0.1"}, "rate_limited": {"127.0.0.1"}}


def _session(stack: Stack, name: str) -> TestClient:
    client = TestClient(stack.client.app, follow_redirects=False)
    token = stack.client.people.tokens[name]
    r = client.post("/dashboard/login", data={"token": token, "next": "/dashboard"})
    assert r.status_code == 303, r.text
    assert r.headers["cache-control"] == "no-store"  # the answer that sets the cookie
    return client


def test_every_answer_with_data_is_no_store(stack: Stack) -> None:
    # a shell step: its output is stored as an artifact
    plan = {"objective": "no-store walk", "steps": [ECHO]}
    run_id = stack.finished_run(objective="no-store walk", plan=plan)
    listed = stack.client.get(f"/runs/{run_id}/artifacts")
    policies = stack.client.get("/policies")
    assert listed.status_code == policies.status_code == 200, (listed.text, policies.text)
    shas = [a["sha256"] for a in listed.json()["artifacts"]]
    assert shas, listed.json()  # the shell step's output
    policy_id = policies.json()["profiles"][0]["content"]["profile_id"]
    values = {
        "run_id": run_id,
        "sha256": shas[0],
        "policy_id": policy_id,
        "name": "style.css",
    }
    app = stack.client.app
    assert isinstance(app, FastAPI)
    anonymous = TestClient(app, follow_redirects=False)
    missing: list[str] = []
    seen: set[tuple[str, int]] = set()
    for ask in every_request(app, values):
        if ask.path == "/slack/interactions":
            continue  # not configured on this stack: a plain 404, walked in the unit test
        # a session of its own for each route: the walk logs out too
        session = _session(stack, "alice")
        for who, client, headers in (
            ("anonymous", anonymous, {}),
            ("bearer", stack.client, {}),
            ("bearer", stack.client, BAD),
            ("session", session, {}),
        ):
            r = client.request(ask.method, ask.url, headers=headers, json={})
            seen.add((ask.path, r.status_code))
            if r.headers.get("cache-control") != "no-store":
                missing.append(f"{who} {ask.method} {ask.path} -> {r.status_code}")
    assert not missing, missing
    # the answers that carry private data were among them, successful
    for path in (
        "/runs/{run_id}",
        "/runs/{run_id}/events",  # streamed to its end: the run is over
        "/runs/{run_id}/ledger",
        "/dashboard/runs/{run_id}",
        "/dashboard/runs/{run_id}/events",
        "/security-events",
        "/artifacts/{sha256}",  # an artifact's bytes
    ):
        assert (path, 200) in seen, path


# --- forwarded headers ----------------------------------------------------------------


@contextmanager
def _from_loopback(stack: Stack, env: dict[str, str]) -> Iterator[ActingClient]:
    """A shim of its own (its own limits) whose every request comes from 127.0.0.1."""
    settings = ShimSettings.from_env(
        {
            "GATEHOUSE_DATABASE_URL": stack.database_url,
            "GATEHOUSE_TOKENS_FILE": str(stack.client.people.file),
            "GATEHOUSE_RATE_PER_IDENTITY": "off",
            # a row for each refusal: no repeat is counted on another scenario's row
            "GATEHOUSE_SECURITY_EVENT_WINDOW_S": "0.000001",
            **env,
        }
    )
    with ActingClient(create_app(settings), client=LOOPBACK) as client:
        client.people = stack.client.people
        yield client


def _addresses(stack: Stack, run_id: str) -> dict[str, set[str]]:
    """The security events about ``run_id``: their code -> the addresses they name."""
    rows = stack.sql(
        "SELECT error_code, body_json FROM security_events WHERE run_id = :r", r=run_id
    )
    out: dict[str, set[str]] = {}
    for code, body in rows:
        details = json.loads(body)["result_details"]
        out.setdefault(str(code), set()).add(str(details["address"]))
    return out


def test_a_forged_forwarded_for_is_ignored_unless_its_sender_is_a_trusted_proxy(
    stack: Stack,
) -> None:
    forged = [f"198.51.100.{n}" for n in range(1, 9)]
    # no proxy configured: a new address each time changes nothing; the limit holds
    untrusted = "run_" + uuid.uuid4().hex
    with _from_loopback(stack, {"GATEHOUSE_RATE_PER_ADDRESS": "0.01:3"}) as client:
        codes = [
            client.get(f"/runs/{untrusted}", headers={**BAD, "X-Forwarded-For": a}).status_code
            for a in forged
        ]
        assert codes == [401, 401, 401, 429, 429, 429, 429, 429]
    # nor when proxies are configured but the peer is not one of them
    elsewhere = "run_" + uuid.uuid4().hex
    with _from_loopback(
        stack, {"GATEHOUSE_RATE_PER_ADDRESS": "0.01:3", "GATEHOUSE_TRUSTED_PROXIES": "10.0.0.0/8"}
    ) as client:
        codes = [
            client.get(f"/runs/{elsewhere}", headers={**BAD, "X-Forwarded-For": a}).status_code
            for a in forged
        ]
        assert codes == [401, 401, 401, 429, 429, 429, 429, 429]
    # the real peer in every row: the forged addresses are nowhere
    assert _addresses(stack, untrusted) == ONLY_THE_PEER
    assert _addresses(stack, elsewhere) == ONLY_THE_PEER
    # the peer named as a proxy: each forwarded address is a client of its own
    trusted = "run_" + uuid.uuid4().hex
    with _from_loopback(
        stack, {"GATEHOUSE_RATE_PER_ADDRESS": "0.01:3", "GATEHOUSE_TRUSTED_PROXIES": "127.0.0.1"}
    ) as client:
        codes = [
            client.get(f"/runs/{trusted}", headers={**BAD, "X-Forwarded-For": a}).status_code
            for a in forged
        ]
        assert codes == [401] * len(forged)
    assert _addresses(stack, trusted) == {"unauthorized": set(forged)}


# --- the event-stream cap -------------------------------------------------------------


def _waiting_run(stack: Stack) -> str:
    """A run that waits for its approval: its stream stays open."""
    plan = noop_plan(1)
    r = stack.submit({"recipe": "echo", "objective": "streams", "mode": "run-plan", "plan": plan})
    assert r.status_code == 202, r.text
    run_id: str = r.json()["run_id"]
    stack.wait(run_id, {"waiting_approval"})
    return run_id


def _open(client: httpx.Client, exits: ExitStack, url: str, headers: dict[str, str]) -> Any:
    """A stream opened (its head read) and held until ``exits`` closes it."""
    return exits.enter_context(client.stream("GET", url, headers=headers))


def _refused(client: httpx.Client, url: str, headers: dict[str, str]) -> bool:
    """Whether a stream is refused (429, with Retry-After); one accepted is closed at once."""
    with client.stream("GET", url, headers=headers) as r:
        if r.status_code != 429:
            assert r.status_code == 200, r.status_code
            return False
        r.read()
        if r.headers["content-type"].startswith("application/json"):
            assert r.json()["error"]["code"] == "rate_limited"
            assert int(r.headers["Retry-After"]) >= 1
        else:  # the dashboard's: its error page
            assert "GATEHOUSE_MAX_EVENT_STREAMS" in r.text
        return True


def _open_once_free(
    client: httpx.Client, exits: ExitStack, url: str, headers: dict[str, str]
) -> Any:
    """A stream opened once the shim has seen an earlier one's client hang up (the
    hang-up reaches the shim after the client's close returns)."""
    for _ in range(200):
        opening = client.stream("GET", url, headers=headers)
        stream = opening.__enter__()
        if stream.status_code == 200:
            exits.push(opening.__exit__)
            return stream
        opening.__exit__(None, None, None)
        assert stream.status_code == 429, stream.status_code
        time.sleep(0.05)
    raise AssertionError("a closed stream's slot was never given back")


def test_one_stream_over_the_cap_is_refused_and_closed_ones_count_no_more(stack: Stack) -> None:
    run_id = _waiting_run(stack)
    alice, bob = stack.auth("alice"), stack.auth("bob")
    api, page = f"/runs/{run_id}/events", f"/dashboard/runs/{run_id}/events"
    env = {"GATEHOUSE_MAX_EVENT_STREAMS": "2"}
    with (
        ServedShim(stack.database_url, stack.client.people.file, env=env) as url,
        httpx.Client(base_url=url, timeout=30) as client,
    ):
        with ExitStack() as held:
            first = _open(client, held, api, alice)
            assert first.status_code == 200
            assert first.headers["content-type"].startswith("text/event-stream")
            assert first.headers["cache-control"] == "no-store"
            assert _open(client, held, api, alice).status_code == 200
            assert _refused(client, api, alice)  # the third: refused, not held
            # the dashboard's stream counts against the same identity
            token = stack.client.people.tokens["alice"]
            login = client.post("/dashboard/login", data={"token": token, "next": "/dashboard"})
            assert login.status_code == 303
            assert _refused(client, page, {})
            client.cookies.clear()
            # another identity has slots of its own
            assert _open(client, held, api, bob).status_code == 200
        # closed: alice's slots are back; HEADs, which never stream, do not take one
        for _ in range(5):
            head = client.head(api, headers=alice)
            assert head.status_code == 405, head.status_code  # GET only: no stream opened
            assert head.headers["cache-control"] == "no-store"
        with ExitStack() as held:
            _open_once_free(client, held, api, alice)
            _open_once_free(client, held, api, alice)
            assert _refused(client, api, alice)


# --- the shim as it is served ---------------------------------------------------------


def test_the_served_shim_ignores_forged_forwarded_for_and_cuts_slow_heads(
    stack: Stack, tmp_path: Path
) -> None:
    """The shim as ``gatehouse up`` serves it (``shim.local.start_shim``: uvicorn's own
    options): uvicorn believes no forwarded header from loopback, and a head sent a
    byte at a time is cut off."""
    port = free_port()
    env = {
        "GATEHOUSE_RATE_PER_ADDRESS": "0.01:3",
        "GATEHOUSE_RATE_PER_IDENTITY": "off",
        "GATEHOUSE_SECURITY_EVENT_WINDOW_S": "0.000001",
        "GATEHOUSE_HEADER_TIMEOUT_S": "1",
    }
    log = tmp_path / "shim.log"
    shim = start_shim(stack.database_url, port, log, stack.client.people.file, extra_env=env)
    try:
        base = f"http://127.0.0.1:{port}"
        wait_healthy(base, shim)
        run_id = "run_" + uuid.uuid4().hex
        with httpx.Client(base_url=base, timeout=30) as client:
            codes = [
                client.get(
                    f"/runs/{run_id}", headers={**BAD, "X-Forwarded-For": f"198.51.100.{n}"}
                ).status_code
                for n in range(1, 7)
            ]
        assert codes == [401, 401, 401, 429, 429, 429], log.read_text()
        assert _addresses(stack, run_id) == {
            "unauthorized": {"127.0.0.1"},
            "rate_limited": {"127.0.0.1"},
        }
        with socket.create_connection(("127.0.0.1", port)) as conn:
            conn.settimeout(30)  # a bound for the test not to hang, not a measurement
            head = b"GET /healthz HTTP/1.1\r\nHost: shim\r\nX-Slow: " + b"a" * 400
            cut = False
            for byte in head:  # a byte every 50 ms: 20 s for the whole head
                try:
                    conn.send(bytes([byte]))
                except OSError:
                    cut = True
                    break
                time.sleep(0.05)
            if not cut:
                try:
                    cut = conn.recv(4096) == b""
                except ConnectionResetError:
                    cut = True
            assert cut, "a head that took 20 s was still being read"
    finally:
        stop([shim])
