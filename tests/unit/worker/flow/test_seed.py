"""Seeded choices: the same seed and purpose give the same draw, anywhere."""

from __future__ import annotations

from worker.flow import draw, fresh_seed, planner_seed


def test_a_draw_depends_only_on_seed_and_purpose() -> None:
    assert draw("s", "backoff", "run", "step", "1") == draw("s", "backoff", "run", "step", "1")
    assert draw("s", "backoff", "run", "step", "1") != draw("s", "backoff", "run", "step", "2")
    assert draw("s", "a") != draw("t", "a")
    # length-prefixed: moving a boundary between parts changes the draw
    assert draw("s", "ab", "c") != draw("s", "a", "bc")


def test_draws_are_spread_over_the_unit_interval() -> None:
    values = [draw("seed", str(i)) for i in range(2000)]
    assert all(0.0 <= v < 1.0 for v in values)
    assert 0.45 < sum(values) / len(values) < 0.55
    assert min(values) < 0.01 and max(values) > 0.99


def test_planner_seed_is_a_31_bit_integer_per_run() -> None:
    first = planner_seed("42", "run_a")
    assert first == planner_seed("42", "run_a")
    assert first != planner_seed("42", "run_b")
    assert 0 <= first < 2**31


def test_fresh_seeds_differ() -> None:
    assert fresh_seed() != fresh_seed()
    assert len(fresh_seed()) == 32
