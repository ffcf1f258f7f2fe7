"""Seeded choices: every random choice of a run is drawn from its seed.

The seed is ``RANDOM_SEED`` when the worker has it, otherwise a fresh one;
either way it is recorded on the run when it begins (``runs.random_seed``).
A draw is a hash of the seed and what the draw is for, so the same seed and
inputs give the same choices in any process, in any order, and in a replay.
"""

from __future__ import annotations

import secrets

from contracts import sha256_hex

__all__ = ["draw", "fresh_seed", "planner_seed"]


def fresh_seed() -> str:
    return secrets.token_hex(16)


def draw(seed: str, *purpose: str) -> float:
    """A number in [0, 1) determined by the seed and the purpose."""
    preimage = "".join(f"{len(p)}:{p};" for p in (seed, *purpose))
    return int(sha256_hex(preimage.encode("utf-8"))[:13], 16) / float(1 << 52)


def planner_seed(seed: str, run_id: str) -> int:
    """The ``seed`` a model planner is asked to sample with (a 31-bit integer)."""
    return int(draw(seed, "planner", run_id) * (1 << 31))
