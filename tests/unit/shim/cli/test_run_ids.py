"""A run id is checked before anything is sent, and a redirect is never taken for an answer.

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
