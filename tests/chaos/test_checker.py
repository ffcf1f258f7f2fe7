"""The checker on hand-made histories: it must be able to fail, in each category."""

from __future__ import annotations

from tests.chaos.checker import Flag, Observation, check
from tests.chaos.model import Channel, Effect, make_plan


def _effects(*ids: str, channel: Channel = Channel.KEYED) -> list[Effect]:
    return [Effect(effect_id=i, channel=channel, tag=i.split(".")[0], step_id="s") for i in ids]


def _seen(*ids: str) -> list[Observation]:
    return [Observation(effect_id=i, source="sink") for i in ids]


def test_exactly_once_is_ok() -> None:
    v = check(_effects("a.s", "b.s"), _seen("b.s", "a.s"))
    assert v.passed
    assert v.ok == ["a.s", "b.s"]
    assert v.counts()["ok"] == 2 and v.counts()["lost"] == 0


def test_a_missing_effect_is_lost() -> None:
    v = check(_effects("a.s", "b.s"), _seen("a.s"))
    assert not v.passed
    assert v.lost == ["b.s"] and v.ok == ["a.s"]


def test_an_effect_applied_twice_is_duplicated() -> None:
    v = check(_effects("a.s"), _seen("a.s", "a.s"))
    assert not v.passed
    assert v.duplicated == ["a.s"] and not v.ok


def test_an_effect_no_approved_plan_contains_is_unexpected() -> None:
    v = check(_effects("a.s"), _seen("a.s", "rejected.s"))
    assert not v.passed
    assert v.unexpected == ["rejected.s"]
    assert v.ok == ["a.s"]


def test_nothing_expected_and_nothing_seen_passes() -> None:
    assert check([], []).passed


def test_a_flagged_and_rightly_resolved_call_is_in_doubt_not_a_failure() -> None:
    flags = [Flag("a.s", "k" * 64, "applied", truth_applied=True)]
    v = check(_effects("a.s"), _seen("a.s"), flags, interrupted=["a.s"])
    assert v.passed
    assert v.in_doubt == ["a.s"] and not v.ok
    assert v.counts()["flags"] == 1


def test_not_applied_then_sent_again_once_is_in_doubt() -> None:
    flags = [Flag("a.s", "k" * 64, "not_applied", truth_applied=False)]
    v = check(_effects("a.s"), _seen("a.s"), flags, interrupted=["a.s"])
    assert v.passed and v.in_doubt == ["a.s"]


def test_an_interrupted_call_never_flagged_fails() -> None:
    v = check(_effects("a.s", channel=Channel.UNKEYED), _seen("a.s"), interrupted=["a.s"])
    assert not v.passed
    assert v.unflagged == ["a.s"]


def test_silently_reapplied_after_interruption_is_duplicated_and_unflagged() -> None:
    v = check(_effects("a.s", channel=Channel.UNKEYED), _seen("a.s", "a.s"), interrupted=["a.s"])
    assert v.duplicated == ["a.s"] and v.unflagged == ["a.s"]


def test_silently_dropped_after_interruption_is_lost() -> None:
    v = check(_effects("a.s", channel=Channel.UNKEYED), [], interrupted=["a.s"])
    assert v.lost == ["a.s"] and v.unflagged == ["a.s"]


def test_a_resolution_against_the_truth_fails() -> None:
    flags = [Flag("a.s", "k" * 64, "not_applied", truth_applied=True)]
    v = check(_effects("a.s"), _seen("a.s", "a.s"), flags)
    assert not v.passed
    assert v.duplicated == ["a.s"]
    assert len(v.misresolved) == 1 and "was there" in v.misresolved[0]


def test_a_flag_never_resolved_fails() -> None:
    v = check(_effects("a.s"), [], [Flag("a.s", "k" * 64, None, truth_applied=None)])
    assert not v.passed
    assert v.lost == ["a.s"] and "never resolved" in v.misresolved[0]


def test_an_unknowable_truth_accepts_either_resolution() -> None:
    flags = [Flag("a.s", "k" * 64, "not_applied", truth_applied=None)]
    assert check(_effects("a.s", channel=Channel.SHELL), _seen("a.s"), flags).passed


def test_the_model_gives_one_effect_per_step_with_stable_step_ids() -> None:
    planned = make_plan(
        "r1", "http://127.0.0.1:9", [Channel.KEYED, Channel.SHELL, Channel.KEYED, Channel.NOTE]
    )
    assert [e.step_id for e in planned.effects] == ["keyed", "shell", "keyed-2", "note"]
    assert [e.effect_id for e in planned.effects] == [
        "r1.keyed",
        "r1.shell",
        "r1.keyed-2",
        "r1.note",
    ]
    assert len(planned.digest) == 64
    again = make_plan(
        "r1", "http://127.0.0.1:9", [Channel.KEYED, Channel.SHELL, Channel.KEYED, Channel.NOTE]
    )
    assert again.digest == planned.digest
