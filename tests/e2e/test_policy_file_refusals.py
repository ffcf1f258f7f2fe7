"""``gatehouse shim``, ``up``, ``demo`` and the worker refuse a bad policy file on one line.

Each real entry point, in a process of its own, is given an operator's folder
(``GATEHOUSE_EXTRA_POLICIES``) holding one hostile file: it must exit non-zero,
write one line that names the file, and no traceback. Nothing is started: the
files are read before any server, worker or database is touched.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.test_cli_edges import _one_line, _run

# (folder, file name, content): a name with a terminal escape, a Cedar set named
# with a path-like "..", a profile that does not parse.
HOSTILE = [
    ("cedar", "evil\x1b[31m.cedar", b"permit(principal, action, resource);\n"),
    ("cedar", "a..b.cedar", b"permit(principal, action, resource);\n"),
    ("profiles", "broken.json", b'{"profile_id": "broken", \n'),
]
ENTRY_POINTS = {
    "shim": ["shim", "--port", "1", "--database-url", "sqlite:///{tmp}/gatehouse.sqlite"],
    "up": [
        "up",
        "--port",
        "1",
        "--var",
        "{tmp}/var",
        "--database-url",
        "sqlite:///{tmp}/gatehouse.sqlite",
    ],
    "demo": ["demo", "--dir", "{tmp}/var"],
}


def _hostile(tmp_path: Path, sub: str, name: str, content: bytes) -> Path:
    folder = tmp_path / "extra"
    (folder / sub).mkdir(parents=True)
    (folder / sub / name).write_bytes(content)
    return folder


@pytest.mark.parametrize("entry", sorted(ENTRY_POINTS))
@pytest.mark.parametrize("case", range(len(HOSTILE)))
def test_the_cli_refuses_a_bad_policy_file(tmp_path: Path, entry: str, case: int) -> None:
    sub, name, content = HOSTILE[case]
    extra = _hostile(tmp_path, sub, name, content)
    argv = [a.format(tmp=tmp_path) for a in ENTRY_POINTS[entry]]
    done = _run(*argv, cwd=tmp_path, GATEHOUSE_EXTRA_POLICIES=str(extra))
    assert done.returncode == 1, done
    line = _one_line(done)
    assert name.encode("unicode_escape").decode() in line, line
    assert not (tmp_path / "var").exists()  # nothing was started or written
    assert not (tmp_path / "gatehouse.sqlite").exists()


@pytest.mark.parametrize("case", range(len(HOSTILE)))
def test_the_worker_refuses_a_bad_policy_file(tmp_path: Path, case: int) -> None:
    sub, name, content = HOSTILE[case]
    extra = _hostile(tmp_path, sub, name, content)
    done = subprocess.run(
        [sys.executable, "-m", "worker"],
        cwd=tmp_path,
        env={
            "PATH": "/usr/bin:/bin",
            "GATEHOUSE_DATABASE_URL": f"sqlite:///{tmp_path}/gatehouse.sqlite",
            "GATEHOUSE_EXTRA_POLICIES": str(extra),
            "PYTHONPATH": str(Path(__file__).resolve().parents[2]),
        },
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert done.returncode == 1, done
    line = _one_line(done)
    assert line.startswith("gatehouse worker: "), line
    assert name.encode("unicode_escape").decode() in line, line
    assert not (tmp_path / "gatehouse.sqlite").exists()
