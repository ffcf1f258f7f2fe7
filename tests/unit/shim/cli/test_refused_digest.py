"""``gatehouse approve --digest abc`` (and ``reject``) prints one clear line: the
shim's refusal, which says what a plan digest is, said once.

The scripted shim answers with the shim's own body reader (``read_body``) and
error envelope (``error_response``), so the line is the one a real shim gives.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from starlette.requests import Request

from contracts import ApprovalRequest, GatehouseError
from shim.api.http import error_response, read_body
from shim.cli import main
from shim.cli.client import ApiError
from shim.cli.failure import failure

RUN = "run_" + "a" * 32


def _as_the_shim_reads_it(request: httpx.Request) -> httpx.Response:
    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": request.content, "more_body": False}

    headers = [(k.lower().encode(), v.encode()) for k, v in request.headers.items()]
    asked = Request({"type": "http", "method": "POST", "path": "/", "headers": headers}, receive)
    try:
        asyncio.run(read_body(asked, 1 << 20, "env.approval_request_v1", ApprovalRequest))
    except GatehouseError as exc:
        answer = error_response(exc)
        body = bytes(answer.body)
        return httpx.Response(answer.status_code, content=body, headers=answer.headers)
    raise AssertionError(f"the shim took {request.content!r}")


@pytest.mark.parametrize("command", ["approve", "reject"])
@pytest.mark.parametrize(
    ("digest", "why"),
    [
        ("abc", "3 characters"),
        ("b" * 63, "63 characters"),
        ("b" * 65, "65 characters"),
        ("B" * 64, "character 1 is 'B'"),
        ("b" * 63 + "z", "character 64 is 'z'"),
    ],
    ids=["short", "one-short", "one-long", "uppercase", "not-hex"],
)
def test_a_digest_that_is_not_one_is_refused_in_one_clear_line(
    command: str,
    digest: str,
    why: str,
    answered_by: Callable[[Callable[[httpx.Request], httpx.Response]], None],
    capsys: pytest.CaptureFixture[str],
) -> None:
    answered_by(_as_the_shim_reads_it)
    with pytest.raises(SystemExit) as done:
        main([command, RUN, "--digest", digest, "--url", "http://shim", "--token", "gh_x"])
    assert done.value.code == 1
    err = capsys.readouterr().err
    assert err == (
        f"gatehouse: invalid_request (HTTP 422): /plan_digest: not a digest ({why}): a digest"
        " is 64 lowercase hex characters (0-9, a-f), as the plan card's plan_digest is\n"
    )


def test_details_the_message_does_not_state_are_still_printed() -> None:
    problems = [
        {"path": "/", "problem": "Additional properties are not allowed ('x' was unexpected)"},
        {"path": "/plan_digest", "problem": "not a digest (3 characters)"},
    ]
    message = f"/: {problems[0]['problem']} (and 1 more)"
    body = {
        "error": {"code": "invalid_request", "message": message, "details": {"errors": problems}}
    }
    said = failure(ApiError(422, json.loads(json.dumps(body))), argparse.Namespace())
    assert said is not None
    assert said.details == ("  /plan_digest: not a digest (3 characters)",)
