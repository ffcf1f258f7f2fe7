"""Judging another process dead without comparing anybody's wall clock.

A worker's heartbeat and the reaper leader's lease each carry a counter that
moves with every beat. An observer remembers each counter and *when, on its own
monotonic clock,* it last saw it move. Silence is the time since then. No
timestamp written by another machine (or by this one before its wall clock was
stepped) enters the judgement, so a wall clock stepped forward cannot make the
living look dead, and one stepped back cannot make the dead look alive.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable, Mapping

__all__ = ["Silence"]


class Silence:
    """For each key, how long (monotonic seconds) its observed value has not changed."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._seen: dict[str, tuple[Hashable, float]] = {}

    def see(self, key: str, value: Hashable) -> float:
        """Record what ``key`` shows now; return how long it has shown it."""
        now = self._clock()
        held = self._seen.get(key)
        if held is None or held[0] != value:
            self._seen[key] = (value, now)
            return 0.0
        return now - held[1]

    def see_all(self, values: Mapping[str, Hashable]) -> dict[str, float]:
        """``see`` every key; keys no longer shown are forgotten."""
        for gone in set(self._seen) - set(values):
            del self._seen[gone]
        return {key: self.see(key, value) for key, value in values.items()}

    def forget(self) -> None:
        """Start over: after this observer lost sight (its own ticks failed), silence
        it did not watch must not count."""
        self._seen.clear()
