"""``gatehouse ledger verify``: the report's records line says what was held to the
run's checkpoints and, whole, what was not covered; a broken run exits 3."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from ledger.anchors import Anchor
from ledger.chain_verify import ChainReport
from shim.cli import main

RUN = "run_" + "e" * 32
HELD = {"decisions": 1, "endorsements": 0, "revisions": 2, "edits": 0, "cancels": 0, "run": 1,
        "unchained_calls": 0}  # fmt: skip
ANCHORS = (Anchor(RUN, 2, "h" * 64, "t", "the database", False),)


def _verify(
    answered_by: Callable[[Callable[[httpx.Request], httpx.Response]], None],
    capsys: pytest.CaptureFixture[str],
    report: ChainReport,
) -> tuple[int, str]:
    answered_by(lambda _request: httpx.Response(200, json=report.to_json()))
    with pytest.raises(SystemExit) as done:
        main(["ledger", "verify", RUN, "--url", "http://shim", "--token", "gh_x"])
    code = done.value.code
    assert isinstance(code, int)
    return code, " ".join(capsys.readouterr().out.split())


def test_the_records_held_and_what_is_not_covered_are_printed(
    answered_by: Callable[[Callable[[httpx.Request], httpx.Response]], None],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("COLUMNS", "80")  # narrow: the sentence wraps, it is not cut
    held = ChainReport(RUN, 2, True, head="h" * 64, anchors=ANCHORS, records=HELD)
    code, out = _verify(answered_by, capsys, held)
    assert code == 0 and "Ledger chain intact" in out
    assert "records decisions 1, revisions 2, run 1; not checked: episodes, artifacts," in out
    assert "run events, plan cards, run steps" in out

    old = ChainReport(RUN, 2, True, head="h" * 64, anchors=ANCHORS)  # checkpoint before records
    code, out = _verify(answered_by, capsys, old)
    assert code == 0
    assert "no checkpoint of this run commits to its other records" in out
    assert "(a changed decision still is, by its seal); not checked: episodes" in out
    assert "…" not in out


def test_a_deleted_record_breaks_the_run(
    answered_by: Callable[[Callable[[httpx.Request], httpx.Response]], None],
    capsys: pytest.CaptureFixture[str],
) -> None:
    reason = (
        "decisions: the plan_approvals row approval_id=apr_1, anchored at t in the database,"
        " was deleted"
    )
    broken = ChainReport(RUN, 2, False, None, None, reason, "h" * 64, ANCHORS, 0, HELD)
    code, out = _verify(answered_by, capsys, broken)
    assert code == 3 and "Ledger chain BROKEN" in out and "approval_id=apr_1" in out


def _at(source: str) -> Anchor:
    return Anchor(RUN, 2, "h" * 64, "t", source, False)


@pytest.mark.parametrize(
    ("anchors", "said"),
    [
        ((), "anchored no checkpoint yet: one is written when the run ends"),
        ((_at("the database"),), "anchored checkpoints 1 in the database; 2 entries; 0 signed"),
        (
            (_at("the database"), _at("var/anchors.jsonl line 1")),
            "anchored checkpoints 1 in the database, 1 in var/anchors.jsonl; 2 entries; 0 signed",
        ),
        (  # a line appended by a run's end that then rolled back and ran again
            (_at("the database"), _at("var/a.jsonl line 1"), _at("var/a.jsonl line 2")),
            "anchored checkpoints 1 in the database, 2 in var/a.jsonl; 2 entries; 0 signed",
        ),
        ((_at("var/a.jsonl line 4"),), "anchored checkpoints 1 in var/a.jsonl; 2 entries;"),
    ],
)
def test_the_anchored_line_counts_each_place_apart(
    anchors: tuple[Anchor, ...],
    said: str,
    answered_by: Callable[[Callable[[httpx.Request], httpx.Response]], None],
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The database's count is the one an evidence bundle carries: a single total over
    the database and the anchor file (``checkpoints: 2`` beside a bundle's 1) is never
    printed, nor the report's JSON."""
    report = ChainReport(RUN, 2, True, head="h" * 64, anchors=anchors, records=HELD)
    code, out = _verify(answered_by, capsys, report)
    assert code == 0 and said in out, out
    assert '"checkpoints"' not in out and "{" not in out


def test_an_anchor_file_under_this_folder_is_named_from_here(
    answered_by: Callable[[Callable[[httpx.Request], httpx.Response]], None],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    """``gatehouse up`` names its anchor file by an absolute path; run from the stack's
    folder, the line says var/anchors.jsonl, the database's count first either way."""
    monkeypatch.chdir(tmp_path)
    file = tmp_path / "var" / "anchors.jsonl"
    elsewhere = "/srv/gatehouse/anchors.jsonl"
    report = ChainReport(
        RUN, 2, True, head="h" * 64, records=HELD,
        anchors=(_at(f"{file} line 3"), _at(f"{elsewhere} line 9"), _at("the database")),
    )  # fmt: skip
    code, out = _verify(answered_by, capsys, report)
    said = f"checkpoints 1 in the database, 1 in {elsewhere}, 1 in var/anchors.jsonl; 2 entries"
    assert code == 0 and said in out, out
