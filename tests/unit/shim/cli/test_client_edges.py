"""The CLI's edges with the shim: a run id checked before anything is sent, a redirect
never taken for an answer, a busy shim asked again after the wait it names.

An empty id once made ``/runs/`` (the list route, answered with a 307) and ``show ''``
crashed on the redirect's empty body.
"""

from __future__ import annotations

import httpx
import pytest

from shim.cli import build_parser, main
from shim.cli.client import ApiError, Client

VALID = "run_" + "0" * 32


@pytest.mark.parametrize(
    "argv",
    [
        ["show", ""],
        ["approve", ""],
        ["reject", "run_x"],
        ["cancel", " " + VALID],
        ["ledger", "show", "RUN_" + "0" * 32],
        ["replay", ""],
        ["runs", "watch", ""],
        ["opa", "reply", "", "hi"],
        ["evidence", "export", ""],
    ],
)
def test_a_malformed_run_id_is_a_usage_error_that_says_what_one_looks_like(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as done:
        main(argv)
    assert done.value.code == 2
    err = capsys.readouterr().err
    assert "is not a run id (run_ then 32 hex digits" in err, err
    assert "Traceback" not in err


def test_a_well_formed_run_id_passes_the_parser() -> None:
    args = build_parser().parse_args(["show", VALID])
    assert args.run_id == VALID


def test_a_redirect_is_an_error_naming_where_it_pointed() -> None:
    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(307, headers={"location": "http://shim/runs"})

    api = Client("http://shim", "gh_x")
    api._http = httpx.Client(base_url="http://shim", transport=httpx.MockTransport(answer))
    with pytest.raises(ApiError) as refused:
        api.get_json("/runs/")
    assert refused.value.status == 307 and refused.value.code == "unexpected_redirect"
    assert "redirect to http://shim/runs" in refused.value.message


def _answering(*answers: httpx.Response, retry_for: float) -> tuple[Client, list[str], list[int]]:
    queue = list(answers)
    sent: list[int] = []
    notices: list[str] = []

    def answer(request: httpx.Request) -> httpx.Response:
        sent.append(1)
        return queue.pop(0)

    api = Client("http://shim", "gh_x", retry_for=retry_for, notice=notices.append)
    api._http = httpx.Client(base_url="http://shim", transport=httpx.MockTransport(answer))
    return api, notices, sent


def _refusal(status: int, code: str, after: str | None) -> httpx.Response:
    headers = {"retry-after": after} if after is not None else {}
    return httpx.Response(status, headers=headers, json={"error": {"code": code, "message": "x"}})


def test_a_busy_shim_is_asked_again_after_the_wait_it_names() -> None:
    api, notices, sent = _answering(
        _refusal(429, "rate_limited", "0"),
        _refusal(503, "overloaded", "0.01"),
        httpx.Response(200, json={"ok": True}),
        retry_for=5,
    )
    assert api.get_json("/recipes") == {"ok": True}
    assert len(sent) == 3
    assert notices == [
        "the shim answered 429 rate_limited: again in 0 s",
        "the shim answered 503 overloaded: again in 0.01 s",
    ]


def test_no_retry_without_retry_after_or_past_the_budget() -> None:
    api, notices, sent = _answering(_refusal(503, "database_unavailable", None), retry_for=5)
    with pytest.raises(ApiError):
        api.get_json("/recipes")
    assert len(sent) == 1 and notices == []
    api, notices, sent = _answering(_refusal(429, "rate_limited", "30"), retry_for=5)
    with pytest.raises(ApiError) as refused:
        api.get_json("/recipes")
    assert refused.value.code == "rate_limited" and len(sent) == 1 and notices == []
