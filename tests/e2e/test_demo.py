"""The README's first command: ``gatehouse demo`` runs one real intent end to end."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest


@pytest.mark.slow
def test_demo_succeeds(tmp_path: Path) -> None:
    gatehouse = Path(sys.executable).parent / "gatehouse"
    done = subprocess.run(
        [str(gatehouse), "demo", "--dir", str(tmp_path / "demo"), "--timeout", "90"],
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    out = done.stdout
    assert done.returncode == 0, out + done.stderr
    assert "status     succeeded" in out
    for step in ("announce", "fetch", "checksum", "size", "report"):
        assert re.search(rf"\[ok \] {step}\b", out), step
    assert "6 call(s)" in out and "MOVA episode(s)" in out
    assert "the trace digest matches the recorded one" in out
    assert "heard 0 new request(s)" in out
    assert (tmp_path / "demo" / "gatehouse.sqlite").is_file()
    # step output is shown as text or JSON, never as Python reprs
    steps = [line for line in out.splitlines() if line.lstrip().startswith("[ok ]")]
    assert steps and not any("{'" in line or "['" in line for line in steps), steps
