"""``gatehouse shim`` and ``gatehouse up`` listen on loopback unless told (``--host``);
on any other address they serve HTTPS, or plain HTTP only when told ``--insecure-http``.

Real processes: a refusal comes before anything is started or written; an accepted
non-loopback shim answers on loopback and, where this machine has one, on its own
network address too."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from contracts import Role
from ledger import Tls, migrate, open_database
from shim.local import free_port, wait_healthy
from shim.tokens import add_token
from tests.support.tls import self_signed

GATEHOUSE = str(Path(sys.executable).parent / "gatehouse")


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("GATEHOUSE_")}


def _network_address() -> str | None:
    """An address of this machine other machines could reach, or None (loopback only).
    A UDP socket's connect sends nothing; it only picks the route's source address."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.254", 9))  # TEST-NET-1: never answered, never sent
        except OSError:
            return None
        address: str = probe.getsockname()[0]
    return None if address.startswith("127.") else address


def _refused(*argv: str, cwd: Path) -> str:
    done = subprocess.run(
        [GATEHOUSE, *argv],
        cwd=cwd,
        env=_env(),
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert done.returncode == 2, done  # usage: asked wrongly, nothing happened
    assert "Traceback" not in done.stderr, done.stderr
    return done.stderr


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.0.2.2", "gatehouse.example.com"])
def test_plain_http_off_loopback_is_refused(tmp_path: Path, host: str) -> None:
    url = f"sqlite:///{tmp_path / 'gh.sqlite'}"
    for command in ("shim", "up"):
        stderr = _refused(command, "--host", host, "--database-url", url, cwd=tmp_path)
        assert f"refusing to serve plain HTTP on {host}" in stderr, stderr
        assert "--tls-cert" in stderr and "--insecure-http" in stderr
    # refused before anything was started or written: no database, no var folder
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def _shim(tmp_path: Path, *flags: str, tls: Tls | None = None) -> None:
    """Start `gatehouse shim` with ``flags``, see it answer /healthz on loopback (and on
    this machine's network address when it listens there), stop it."""
    url = f"sqlite:///{tmp_path / 'gh.sqlite'}"
    db = open_database(url)
    try:
        migrate(db)
    finally:
        db.dispose()
    tokens = tmp_path / "tokens.json"
    add_token(tokens, "olga", [Role.OPERATOR])
    port = free_port()
    log = tmp_path / "shim.log"
    argv = [GATEHOUSE, "shim", "--port", str(port), "--database-url", url]
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [*argv, "--tokens-file", str(tokens), *flags],
            cwd=tmp_path,
            env=_env(),
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    scheme = "https" if tls else "http"
    try:
        wait_healthy(f"{scheme}://127.0.0.1:{port}", proc, tls=tls)
        address = _network_address()
        if "--host" in flags and address is not None:
            wait_healthy(f"{scheme}://{address}:{port}", proc, tls=tls)
    except RuntimeError as exc:
        raise AssertionError(f"{exc}\n{log.read_text(errors='replace')}") from exc
    finally:
        proc.terminate()
        proc.wait(30)


def test_loopback_by_default_serves_plain_http(tmp_path: Path) -> None:
    _shim(tmp_path)


def test_off_loopback_with_tls_is_served(tmp_path: Path) -> None:
    tls = self_signed(tmp_path)
    _shim(
        tmp_path,
        *("--host", "0.0.0.0", "--tls-cert", str(tls.cert), "--tls-key", str(tls.key)),
        tls=tls,
    )


def test_off_loopback_plain_http_when_told(tmp_path: Path) -> None:
    _shim(tmp_path, "--host", "0.0.0.0", "--insecure-http")


def test_up_off_loopback_with_tls(tmp_path: Path) -> None:
    tls = self_signed(tmp_path)
    port = free_port()
    log = tmp_path / "up.log"
    with log.open("wb") as out:
        up = subprocess.Popen(
            [
                GATEHOUSE,
                "up",
                *("--host", "0.0.0.0", "--port", str(port)),
                *("--database-url", f"sqlite:///{tmp_path / 'gh.sqlite'}"),
                *("--var", str(tmp_path / "var")),
                *("--tls-cert", str(tls.cert), "--tls-key", str(tls.key)),
            ],
            cwd=tmp_path,
            env=_env(),
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        var = tmp_path / "var"
        said = f"shim on https://127.0.0.1:{port} (log {var}/shim.log, listening on 0.0.0.0)"
        deadline = time.monotonic() + 90  # a bound on the wait, not an assertion on speed
        while said not in log.read_text():
            assert up.poll() is None, log.read_text()
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.2)
        address = _network_address()
        if address is not None:
            wait_healthy(f"https://{address}:{port}", up, tls=tls)
    finally:
        up.send_signal(signal.SIGINT)
        up.wait(60)
