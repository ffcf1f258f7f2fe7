"""Where a run's event stream resumes: after ``Last-Event-ID`` if sent, else after ``?after=``."""

from __future__ import annotations

import pytest

from contracts import GatehouseError
from shim.api.services.events import resume_point


def test_resume_points() -> None:
    assert resume_point(None, None) == 0
    assert resume_point(None, 5) == 5
    assert resume_point(" 12 ", 5) == 12  # the header wins
    for bad in ("x", "-1", "1" * 13):
        with pytest.raises(GatehouseError):
            resume_point(bad, None)
