"""End to end: ``gatehouse up --tls-cert --tls-key`` serves HTTPS, says so, and the
client commands reach it with ``--ca``."""

from __future__ import annotations

import re
import signal
import ssl
import subprocess
import sys
import time
from pathlib import Path

import httpx

from shim.local import free_port
from tests.support.tls import self_signed


def test_up_serves_https(tmp_path: Path) -> None:
    tls = self_signed(tmp_path)
    port = free_port()
    log = tmp_path / "up.log"
    bin_dir = Path(sys.executable).parent
    var = tmp_path / "var"
    with log.open("wb") as out:
        up = subprocess.Popen(
            [
                str(bin_dir / "gatehouse"),
                "up",
                "--database-url",
                f"sqlite:///{tmp_path / 'gh.sqlite'}",
                "--port",
                str(port),
                "--var",
                str(var),
                "--tls-cert",
                str(tls.cert),
                "--tls-key",
                str(tls.key),
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=tmp_path,
        )
    try:
        url = f"https://127.0.0.1:{port}"
        deadline = time.monotonic() + 90
        while f"shim on {url}" not in log.read_text():
            assert up.poll() is None, log.read_text()
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.2)
        trust = ssl.create_default_context(cafile=str(tls.cert))
        assert httpx.get(f"{url}/healthz", verify=trust, trust_env=False).status_code == 200
        token = re.search(r"local-submitter (\S+)", (var / "local-tokens.txt").read_text())
        assert token is not None
        command = [str(bin_dir / "gatehouse"), "runs", "--url", url, "--token", token.group(1)]
        done = subprocess.run(
            [*command, "--ca", str(tls.cert)],
            check=False,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        refused = subprocess.run(command, check=False, capture_output=True, text=True, timeout=60)
        assert refused.returncode == 1
        assert "CERTIFICATE_VERIFY_FAILED" in refused.stderr
    finally:
        up.send_signal(signal.SIGINT)
        up.wait(60)
