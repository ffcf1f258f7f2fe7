"""``gatehouse doctor`` where OpenCode is not installed (the image carries none)."""

from __future__ import annotations

from pathlib import Path

import pytest

from worker.doctor import report


def test_no_opencode_folder_is_said_plainly_not_as_a_missing_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GATEHOUSE_OPENCODE_DIR", str(tmp_path / "absent"))
    monkeypatch.chdir(tmp_path)
    (found,) = [c for c in report() if c.name == "opencode"]
    assert found.ok is None  # not a failure: only opencode steps need it
    assert found.detail.startswith("OpenCode is not installed here (no folder ")
    assert "setup:opencode" in found.detail and "pin.json" not in found.detail
