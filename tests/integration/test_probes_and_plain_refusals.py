"""Over HTTP, on each backend (a shim on a fresh database; no worker, nothing here is
accepted):

* ``HEAD /healthz`` and ``HEAD /readyz`` answer as ``GET`` does (uptime probes ask
  with ``HEAD``): the same status and headers, no body; and neither is in the
  served OpenAPI document, which the fuzz stage checks against (a ``HEAD`` there
  would be an operation of its own to describe).
* Every route that reads a JSON body refuses one that is not UTF-8 the same way:
  400 ``invalid_json``, saying where, in plain words.
* Every digest the API takes in a path (found in the served document) is told
  what a digest is when it is not one, and so is a decision's ``plan_digest``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import pytest

from contracts import Role
from shim.api.http import DIGEST_PATTERN
from shim.tokens import add_token
from tests.support.stack import ActingClient, People, drop_database, fresh_database_url, shim_client

RUN = "run_" + "0" * 32
JSON = {"content-type": "application/json"}
RAW_REGEX = ("[0-9a-f]", "{64}", "does not match", "should match pattern", "schema violation")


@pytest.fixture(scope="module")
def client(backend: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ActingClient]:
    tmp = tmp_path_factory.mktemp(f"plain-{backend}")
    url = fresh_database_url(backend, tmp)
    people = People(tmp)
    # one who holds every role: each route's body is reached, whoever it is for
    people.tokens["root"] = add_token(people.file, "root", list(Role))
    try:
        with shim_client(url, people, {"GATEHOUSE_RATE_PER_IDENTITY": "off"}) as made:
            yield made
    finally:
        drop_database(url)


def _document(client: ActingClient) -> dict[str, Any]:
    doc: dict[str, Any] = client.get("/openapi.json").json()
    return doc


@pytest.mark.parametrize("path", ["/healthz", "/readyz"])
def test_a_probe_answers_head_as_it_answers_get(client: ActingClient, path: str) -> None:
    got = client.get(path, headers={"Authorization": ""})
    head = client.head(path, headers={"Authorization": ""})
    assert head.status_code == got.status_code, (head.status_code, got.status_code)
    assert dict(head.headers) == dict(got.headers)
    assert int(head.headers["content-length"]) == len(got.content) > 0
    assert head.content == b""
    # left out of the document: the fuzzer and clients see GET only
    operations = _document(client)["paths"][path]
    assert set(operations) == {"get"}, operations


def _json_body_routes(client: ActingClient) -> list[str]:
    found = []
    for path, operations in _document(client)["paths"].items():
        body = operations.get("post", {}).get("requestBody", {}).get("content", {})
        if "application/json" in body:
            found.append(path)
    return found


def test_every_json_body_route_refuses_a_body_that_is_not_utf8_alike(
    client: ActingClient,
) -> None:
    routes = _json_body_routes(client)
    assert {"/intent", "/approve/{run_id}", "/runs/{run_id}/plan"} <= set(routes), routes
    said = "the body is not UTF-8 (JSON text must be): the first bad byte is at offset 15"
    checked = 0
    for path in routes:
        url = re.sub(r"\{[^}]+\}", lambda m: RUN if "run" in m[0] else "0" * 64, path)
        r = client.post(url, content=b'{"objective": "\xff"}', headers=JSON | _root(client))
        if path == "/auth/oidc/exchange":  # the identity provider is looked for first
            assert r.json()["error"]["code"] == "not_found", r.text
            continue
        assert r.status_code == 400, (path, r.text)
        assert r.json()["error"]["code"] == "invalid_json", (path, r.text)
        assert r.json()["error"]["message"] == said, (path, r.text)
        checked += 1
    assert checked >= 8


def _root(client: ActingClient) -> dict[str, str]:
    return client.people.auth("root")


NOT_DIGESTS = {
    "short": "abc",
    "one-long": "a" * 65,
    "uppercase": "A" * 64,
    "not-hex": "g" * 64,
    "zero-width-joiner": "a" * 63 + "\u200d",
}


def _digest_parameters(client: ActingClient) -> list[tuple[str, str, str]]:
    """(method, path, parameter) of every path parameter the document says is a digest."""
    found = []
    for path, operations in _document(client)["paths"].items():
        for method, op in operations.items():
            for p in op.get("parameters", []):
                if p["in"] == "path" and p["schema"].get("pattern") == DIGEST_PATTERN:
                    found.append((method, path, p["name"]))
    return found


@pytest.mark.parametrize("value", list(NOT_DIGESTS.values()), ids=list(NOT_DIGESTS))
def test_a_digest_in_a_path_is_told_what_a_digest_is(client: ActingClient, value: str) -> None:
    found = _digest_parameters(client)
    assert {name for _, _, name in found} == {"op_key", "sha256"}, found
    for method, path, name in found:
        url = path.replace(f"{{{name}}}", quote(value, safe=""))
        r = client.request(method, url, headers=JSON | _root(client), content=b"{}")
        assert r.status_code == 422, (path, r.text)
        error = r.json()["error"]
        assert error["code"] == "invalid_request"
        message = error["message"]
        assert message.startswith(f"a parameter is invalid: /path/{name}: not a digest ("), message
        assert "64 lowercase hex characters" in message, message
        assert not any(raw in message for raw in RAW_REGEX), message
        assert "\u200d" not in message  # shown escaped, never raw


@pytest.mark.parametrize("route", ["approve", "reject"])
def test_a_decision_on_a_short_digest_is_told_what_a_plan_digest_is(
    client: ActingClient, route: str
) -> None:
    r = client.post(f"/{route}/{RUN}", json={"plan_digest": "abc"}, headers=_root(client))
    assert r.status_code == 422, r.text
    error = r.json()["error"]
    assert error["code"] == "invalid_request"
    assert error["message"] == (
        "/plan_digest: not a digest (3 characters): a digest is 64 lowercase hex characters"
        " (0-9, a-f), as the plan card's plan_digest is"
    )
    assert error["details"]["errors"] == [
        {
            "path": "/plan_digest",
            "problem": error["message"].split(": ", 1)[1],
            "pattern": "^[0-9a-f]{64}$",  # the rule it broke, for a program to act on
        }
    ]


def test_the_root_token_is_one_the_shim_knows(client: ActingClient) -> None:
    """The root token this module acts with is one the shim knows (else every check
    above would meet 401 first and prove nothing)."""
    assert client.get("/workers", headers=_root(client)).status_code == 200
