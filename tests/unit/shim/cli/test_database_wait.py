"""``--wait-for-database``: a service started before its database waits for it, bounded."""

from __future__ import annotations

import pytest

from shim.cli import main
from shim.cli.database import waited_for
from shim.cli.errors import FailedError, UnreachableError


def test_a_database_that_answers_on_the_third_try_is_waited_for(
    capsys: pytest.CaptureFixture[str],
) -> None:
    tries: list[int] = []

    def attempt() -> str:
        tries.append(1)
        if len(tries) < 3:
            raise UnreachableError("cannot reach the database")
        return "answered"

    assert waited_for(10, attempt) == "answered"
    assert len(tries) == 3
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 2 and "(try 1); trying again in 0.5 s" in lines[0], lines
    assert "(try 2); trying again in 1.0 s" in lines[1], lines


def test_the_wait_ends_at_its_bound_with_the_last_failure(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = [1000.0]
    pauses: list[float] = []

    def sleep(seconds: float) -> None:
        pauses.append(seconds)
        clock[0] += seconds

    monkeypatch.setattr("shim.cli.database.time.monotonic", lambda: clock[0])
    monkeypatch.setattr("shim.cli.database.time.sleep", sleep)

    def attempt() -> None:
        raise UnreachableError("cannot reach the database x")

    with pytest.raises(UnreachableError, match="database x"):
        waited_for(10, attempt)
    # 0.5, 1, 2, 4 doubling, then the last pause cut to what is left of the 10 s
    assert pauses == [0.5, 1.0, 2.0, 4.0, 2.5], pauses


def test_no_wait_fails_at_once_and_only_an_unreachable_database_is_waited_out() -> None:
    calls: list[int] = []

    def unreachable() -> None:
        calls.append(1)
        raise UnreachableError("down")

    with pytest.raises(UnreachableError):
        waited_for(0, unreachable)
    assert calls == [1]

    def refused() -> None:
        calls.append(1)
        raise FailedError("the schema is newer than this release")

    with pytest.raises(FailedError, match="newer"):
        waited_for(60, refused)
    assert calls == [1, 1]


@pytest.mark.parametrize("value", ["-1", "nan", "inf", "86401", "soon"])
def test_a_bad_wait_is_a_usage_error(value: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["migrate", "--wait-for-database", value])
    assert exited.value.code == 2
    assert "seconds from 0 to 86400" in capsys.readouterr().err
