"""The checker: every expected and observed effect sorted into one category.

In the manner of Jepsen's queue checker, effects are compared as multisets:
what the independent model expects (one application per step of every
approved plan) against what the sink and the ledger actually saw applied.

===============  ==========================================================
category         meaning
===============  ==========================================================
``ok``           expected, applied exactly once, never in doubt
``in_doubt``     expected, applied exactly once, its call was flagged in
                 doubt and an operator resolved it (flagged, handled)
``lost``         expected, never applied
``duplicated``   expected, applied more than once
``unexpected``   applied, but no approved plan contains it: also a security
                 failure (something ran that nobody approved)
===============  ==========================================================

Two more checks ride along: every call the harness knows it interrupted on a
callee without idempotency keys must have been flagged (``unflagged``), and
every flag must have been resolved the way the sink's truth says
(``misresolved``). The verdict passes only when lost, duplicated, unexpected,
unflagged and misresolved are all empty.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from tests.chaos.model import Effect

__all__ = ["Flag", "Observation", "Verdict", "check"]


@dataclass(frozen=True)
class Observation:
    """One application of an effect, as the sink (or the ledger, for local steps) saw it."""

    effect_id: str
    source: str  # "sink" or "ledger"


@dataclass(frozen=True)
class Flag:
    """A call Gatehouse flagged in doubt, and what the operator (the harness) answered."""

    effect_id: str
    op_key: str
    resolution: str | None  # "applied" | "not_applied" | None (never resolved)
    truth_applied: bool | None  # did the effect exist when it was resolved (None: unknowable)


@dataclass
class Verdict:
    ok: list[str] = field(default_factory=list)
    in_doubt: list[str] = field(default_factory=list)
    lost: list[str] = field(default_factory=list)
    duplicated: list[str] = field(default_factory=list)
    unexpected: list[str] = field(default_factory=list)
    unflagged: list[str] = field(default_factory=list)
    misresolved: list[str] = field(default_factory=list)
    flags: int = 0

    @property
    def passed(self) -> bool:
        return not (
            self.lost or self.duplicated or self.unexpected or self.unflagged or self.misresolved
        )

    def counts(self) -> dict[str, int]:
        return {
            "ok": len(self.ok),
            "in_doubt": len(self.in_doubt),
            "lost": len(self.lost),
            "duplicated": len(self.duplicated),
            "unexpected": len(self.unexpected),
            "unflagged": len(self.unflagged),
            "misresolved": len(self.misresolved),
            "flags": self.flags,
        }


def check(
    expected: Iterable[Effect],
    observed: Iterable[Observation],
    flags: Iterable[Flag] = (),
    interrupted: Iterable[str] = (),
) -> Verdict:
    """Sort every effect. ``interrupted``: effect ids whose non-idempotent call the
    harness knows it cut off mid-flight (each must carry a flag)."""
    wanted = {e.effect_id: e for e in expected}
    seen = Counter(o.effect_id for o in observed)
    flag_list = list(flags)
    flagged = {f.effect_id for f in flag_list}
    verdict = Verdict(flags=len(flag_list))
    for effect_id in sorted(wanted):
        applied = seen.get(effect_id, 0)
        if applied == 0:
            verdict.lost.append(effect_id)
        elif applied > 1:
            verdict.duplicated.append(effect_id)
        elif effect_id in flagged:
            verdict.in_doubt.append(effect_id)
        else:
            verdict.ok.append(effect_id)
    verdict.unexpected = sorted(e for e in seen if e not in wanted)
    verdict.unflagged = sorted(set(interrupted) - flagged)
    for f in flag_list:
        if f.resolution is None:
            verdict.misresolved.append(f"{f.effect_id} ({f.op_key[:12]}): never resolved")
        elif f.truth_applied is not None and (f.resolution == "applied") != f.truth_applied:
            verdict.misresolved.append(
                f"{f.effect_id} ({f.op_key[:12]}): resolved {f.resolution},"
                f" but the effect {'was' if f.truth_applied else 'was not'} there"
            )
    return verdict
