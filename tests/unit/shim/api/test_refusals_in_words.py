"""The one body reader (``shim.api.http.read_body``) says why it refuses in plain words.

* A body that is not UTF-8 JSON text, whichever way it is not (a byte no UTF-8 has,
  a sequence cut short, an overlong or surrogate encoding, UTF-16 or UTF-32 with or
  without a byte order mark, a UTF-8 byte order mark), is 400 ``invalid_json`` saying
  so, never in the words of Python's decoder.
* A value that is not a digest, in any body field the API takes a digest in (found
  in the served OpenAPI document, so a new one is checked too), is told what a
  digest is, never shown the regular expression it breaks.
"""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

import pytest
from starlette.requests import Request

from contracts import SCHEMA_MODELS, ErrorCode, GatehouseError, JsonObject, render_schema
from shim.api import create_app
from shim.api.http import DIGEST_PATTERN, read_body
from shim.settings import ShimSettings
from tests.support.plans import noop_plan

LIMIT = 1024 * 1024
# What Python's decoders say; none of it is for the person who sent the body.
PYTHONS_WORDS = re.compile(
    r"codec|can't decode|invalid start byte|invalid continuation|unexpected end of data"
    r"|position \d|utf-8-sig|Expecting|Unexpected UTF-8 BOM|char \d"
)

# (id, body, the offset of its first byte that is not UTF-8, or None: valid UTF-8
# that is still not JSON text in UTF-8)
NOT_UTF8: list[tuple[str, bytes, int | None]] = [
    ("latin-1", '{"objective": "caf\u00e9"}'.encode("latin-1"), 18),
    ("lone-continuation-byte", b'{"objective": "\x80"}', 15),
    ("ff-byte", b'{"objective": "\xff"}', 15),
    ("cut-short-at-the-end", b'{"objective": "\xe2\x82', 15),
    ("cut-short-inside", b'{"objective": "\xe2\x82"}', 15),
    ("overlong-slash", b'{"objective": "\xc0\xaf"}', 15),
    ("encoded-surrogate", b'{"objective": "\xed\xa0\x80"}', 15),
    ("past-u10ffff", b'{"objective": "\xf4\x90\x80\x80"}', 15),
    ("utf-16-with-bom", '{"objective": "x"}'.encode("utf-16"), 0),
    ("utf-16-be-with-bom", b"\xfe\xff" + '{"objective": "x"}'.encode("utf-16-be"), 0),
    ("utf-32-with-bom", '{"objective": "x"}'.encode("utf-32"), 0),
    ("utf-16-le", '{"objective": "x"}'.encode("utf-16-le"), None),
    ("utf-16-be", '{"objective": "x"}'.encode("utf-16-be"), None),
    ("utf-32-le", '{"objective": "x"}'.encode("utf-32-le"), None),
    ("utf-8-bom", b'\xef\xbb\xbf{"objective": "x"}', None),
]


def _request(body: bytes) -> Request:
    sent = False

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if sent:
            return {"type": "http.disconnect"}
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    scope = {
        "type": "http",
        "method": "POST",
        "path": "/",
        "headers": [(b"content-type", b"application/json")],
    }
    return Request(scope, receive)


def _refusal(body: bytes, schema: str) -> GatehouseError:
    model = SCHEMA_MODELS[schema]
    with pytest.raises(GatehouseError) as refused:
        asyncio.run(read_body(_request(body), LIMIT, schema, model))
    return refused.value


@pytest.mark.parametrize(
    ("body", "offset"), [c[1:] for c in NOT_UTF8], ids=[c[0] for c in NOT_UTF8]
)
def test_a_body_that_is_not_utf8_json_text_is_said_so_plainly(
    body: bytes, offset: int | None
) -> None:
    exc = _refusal(body, "env.cancel_request_v1")
    assert exc.code is ErrorCode.INVALID_JSON
    assert exc.code.http_status == 400
    assert "UTF-8" in exc.message, exc.message
    assert not PYTHONS_WORDS.search(exc.message), exc.message
    if offset is not None:
        assert exc.message.endswith(f"the first bad byte is at offset {offset}"), exc.message
        with pytest.raises(UnicodeDecodeError) as decoded:
            body.decode("utf-8")
        assert decoded.value.start == offset  # the table's offsets are UTF-8's own


def _digest_fields(node: object, path: str = "") -> list[str]:
    """The path of every property of ``node`` (a JSON Schema) whose pattern is a digest's;
    one inside ``$defs`` under ``/$defs/…``."""
    found: list[str] = []
    if isinstance(node, dict):
        if node.get("pattern") == DIGEST_PATTERN:
            found.append(path)
        for key, value in node.items():
            if key in ("properties", "$defs") and isinstance(value, dict):
                where = path if key == "properties" else f"{path}/$defs"
                for name, inner in value.items():
                    found += _digest_fields(inner, f"{where}/{name}")
            else:
                found += _digest_fields(value, path)
    elif isinstance(node, list):
        for item in node:
            found += _digest_fields(item, path)
    return found


def _body_schemas() -> list[str]:
    """The contract of every JSON body the served API reads."""
    doc = create_app(ShimSettings.from_env({})).openapi()
    models = {m.__name__: name for name, m in SCHEMA_MODELS.items()}
    names: list[str] = []
    for operations in doc["paths"].values():
        for op in operations.values():
            body = op.get("requestBody", {}).get("content", {}).get("application/json")
            if body is not None:
                model = body["schema"]["$ref"].rsplit("/", 1)[-1]
                assert model in models, f"{model} is a body with no contract in SCHEMA_MODELS"
                names.append(models[model])
    return sorted(set(names))


# A body valid but for the digest under test, for each contract that takes one.
VALID: dict[str, JsonObject] = {
    "env.approval_request_v1": {"plan_digest": "0" * 64},
    "env.plan_edit_v1": {"plan": noop_plan(1), "previous_digest": "0" * 64},
}
DIGEST_FIELDS = [
    (name, field) for name in _body_schemas() for field in _digest_fields(render_schema(name))
]
NOT_DIGESTS = {
    "empty": "",
    "short": "abc",
    "one-short": "a" * 63,
    "one-long": "a" * 65,
    "far-too-long": "a" * 1000,  # past where jsonschema cuts the problem it states
    "uppercase": "A" * 64,
    "not-hex": "g" * 64,
    "a-zero-width-joiner": "a" * 63 + "\u200d",
    "spaced": " " + "a" * 63,
}


def test_every_digest_a_body_takes_is_checked_here() -> None:
    assert {name for name, _ in DIGEST_FIELDS} == set(VALID), DIGEST_FIELDS
    assert ("env.approval_request_v1", "/plan_digest") in DIGEST_FIELDS
    for name, field in DIGEST_FIELDS:
        # a top-level property: the test knows how to reach it (extend it for a nested one)
        assert field.count("/") == 1, (name, field)


@pytest.mark.parametrize("value", list(NOT_DIGESTS.values()), ids=list(NOT_DIGESTS))
@pytest.mark.parametrize(("schema", "field"), DIGEST_FIELDS)
def test_a_value_that_is_not_a_digest_is_told_what_a_digest_is(
    schema: str, field: str, value: str
) -> None:
    body = {**VALID[schema], field.lstrip("/"): value}
    exc = _refusal(json.dumps(body).encode(), schema)
    assert exc.code is ErrorCode.INVALID_REQUEST
    errors = exc.details["errors"]
    assert isinstance(errors, list) and len(errors) == 1, errors
    [problem] = errors
    assert isinstance(problem, dict) and problem["path"] == field
    said = str(problem["problem"])
    assert "64 lowercase hex characters" in said, said
    why = f"({len(value)} characters)" if len(value) != 64 else "(character "
    assert why in said, said
    if field == "/plan_digest":
        assert "the plan card's plan_digest" in said, said
    # the message is the problem, said once: no schema's name, no regular expression
    assert exc.message == f"{field}: {said}"
    for raw in ("[0-9a-f]", "{64}", "does not match", "schema violation", "env."):
        assert raw not in exc.message, exc.message
    assert "\u200d" not in exc.message  # shown escaped, never raw
