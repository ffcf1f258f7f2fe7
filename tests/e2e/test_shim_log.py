"""The shim's log, as ``gatehouse up`` starts it (``shim.local.start_shim``): the file
``up`` points to holds the start and stop lines, one line per request, and
Gatehouse's own errors, each stamped; a query string never reaches it.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import httpx
import pytest

from contracts import Role
from ledger import migrate, open_database
from shim.local import free_port, start_shim, stop, wait_healthy
from shim.tokens import add_token

_STAMPED = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d{4} (INFO|WARNING|ERROR) ")


@pytest.mark.slow
def test_the_shim_log_holds_its_start_each_request_and_its_errors(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'gatehouse.sqlite'}"
    db = open_database(url)
    migrate(db)
    db.dispose()
    tokens = tmp_path / "tokens.json"
    token = add_token(tokens, "alice", [Role.SUBMITTER])
    port, log = free_port(), tmp_path / "shim.log"
    shim = start_shim(url, port, log, tokens)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(base, shim)
        secret = "s3cr3t-in-a-query"
        with httpx.Client(base_url=base, timeout=10) as client:
            assert client.get(f"/runs?cursor={secret}", headers={"X-Nope": "1"}).status_code == 401
            tokens.unlink()  # the shim keeps its last good tokens and says so in the log
            gone = "is gone; keeping the last good tokens"
            deadline = time.monotonic() + 30  # a bound for the test not to hang
            while gone not in log.read_text() and time.monotonic() < deadline:
                client.get("/runs", headers={"Authorization": f"Bearer {token}"})
                time.sleep(0.2)
    finally:
        stop([shim])
    text = log.read_text()
    lines = text.splitlines()
    assert secret not in text
    assert any("uvicorn: Uvicorn running on" in ln for ln in lines), text
    assert any('"GET /healthz HTTP/1.1" 200' in ln for ln in lines), text
    assert any('"GET /runs?... HTTP/1.1" 401' in ln for ln in lines), text
    assert any(
        "ERROR gatehouse.shim.tokens: the tokens file" in ln and "is gone" in ln for ln in lines
    ), text
    assert any("uvicorn: Finished server process" in ln for ln in lines), text
    assert all(_STAMPED.match(ln) for ln in lines), text
