"""The served OpenAPI document and the code agree where they once did not.

* A 405 names the methods the route takes (``Allow``, RFC 9110), for every route
  and for TRACE and OPTIONS too.
* ``GET /runs/{id}/wait?until=``: the document states the pattern the code enforces.
* ``POST /runs/{id}/messages``: the document says a message is text, or ``end: true``
  (``{"end": false}`` was allowed by it and refused by the code).
"""

from __future__ import annotations

import re
from typing import Any

import jsonschema
import pytest

from tests.support.plans import noop_plan
from tests.support.stack import Stack

_METHODS = ("get", "post", "put", "patch", "delete")


def _document(stack: Stack) -> dict[str, Any]:
    r = stack.client.get("/openapi.json", headers={"Authorization": ""})
    assert r.status_code == 200
    doc: dict[str, Any] = r.json()
    return doc


def _concrete(path: str) -> str:
    return re.sub(r"\{[^}]+\}", lambda m: "run_" + "0" * 32 if "run" in m[0] else "x" * 64, path)


def test_every_405_names_the_methods_the_route_takes(stack: Stack) -> None:
    checked = 0
    for path, operations in _document(stack)["paths"].items():
        served = {m.upper() for m in operations if m in _METHODS}
        for method in ("PUT", "PATCH", "DELETE", "TRACE", "OPTIONS"):
            if method in served:
                continue
            r = stack.client.request(method, _concrete(path), headers=stack.auth("olga"))
            assert r.status_code == 405, (method, path, r.status_code)
            assert r.json()["error"]["code"] == "method_not_allowed"
            allowed = {m.strip() for m in r.headers.get("allow", "").split(",") if m.strip()}
            assert served <= allowed, (method, path, r.headers.get("allow"))
            checked += 1
    assert checked > 50


@pytest.mark.parametrize(
    "until", ["", "succeeded", "waiting_approval, succeeded", "bogus", "succeeded,", ","]
)
def test_wait_until_is_refused_exactly_when_the_document_says(stack: Stack, until: str) -> None:
    doc = _document(stack)
    params = doc["paths"]["/runs/{run_id}/wait"]["get"]["parameters"]
    [schema] = [p["schema"] for p in params if p["name"] == "until"]
    found = [schema, *schema.get("anyOf", [])]
    [pattern] = [s["pattern"] for s in found if "pattern" in s]
    run_id = stack.submit({"recipe": "echo", "objective": "wait", "mode": "plan-only"}).json()[
        "run_id"
    ]
    r = stack.client.get(f"/runs/{run_id}/wait", params={"until": until, "timeout_s": 0.1})
    allowed = re.search(pattern, until) is not None
    assert (r.status_code != 422) is allowed, (until, r.status_code, r.text[:200])


@pytest.mark.parametrize(
    "body",
    [
        {"text": "hi"},
        {"end": True},
        {"end": False},
        {"end": False, "text": "hi"},
        {"end": True, "text": "x"},
        {},
    ],
)
def test_a_message_is_refused_exactly_when_the_document_says(
    stack: Stack, body: dict[str, Any]
) -> None:
    doc = _document(stack)
    operation = doc["paths"]["/runs/{run_id}/messages"]["post"]
    ref = operation["requestBody"]["content"]["application/json"]["schema"]["$ref"]
    schema = {
        **doc["components"]["schemas"][ref.rsplit("/", 1)[-1]],
        "components": doc["components"],
    }
    plan = noop_plan(1)
    submitted = stack.submit({"recipe": "echo", "objective": "m", "mode": "run-plan", "plan": plan})
    run_id = submitted.json()["run_id"]
    r = stack.client.post(f"/runs/{run_id}/messages", json=body)
    valid = jsonschema.Draft202012Validator(schema).is_valid(body)
    assert (r.status_code != 422) is valid, (body, r.status_code, r.text[:200])
