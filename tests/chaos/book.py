"""The run book: every run the harness submitted, its plan and the decision it got."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from tests.chaos.model import Effect, PlannedRun

__all__ = ["Entry", "RunBook"]


@dataclass
class Entry:
    run_id: str
    planned: PlannedRun
    decision: str | None = None  # "approved" | "rejected", as the shim accepted it
    status: str = "queued"  # last status seen
    error_code: str | None = None
    error_message: str | None = None
    case: str | None = None  # the crash-point case this run carried, if any


@dataclass
class RunBook:
    entries: dict[str, Entry] = field(default_factory=dict)
    by_tag: dict[str, set[str]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, run_id: str, planned: PlannedRun) -> Entry:
        with self.lock:
            entry = self.entries.get(run_id)
            if entry is None:
                entry = Entry(run_id=run_id, planned=planned)
                self.entries[run_id] = entry
            self.by_tag.setdefault(planned.tag, set()).add(run_id)
            return entry

    def get(self, run_id: str) -> Entry | None:
        with self.lock:
            return self.entries.get(run_id)

    def all(self) -> list[Entry]:
        with self.lock:
            return list(self.entries.values())

    def effect(self, run_id: str, step_id: str) -> Effect | None:
        entry = self.get(run_id)
        return None if entry is None else entry.planned.effect_of_step(step_id)

    def split_tags(self) -> list[str]:
        """Tags (one intent, one Idempotency-Key) that ended up as more than one run."""
        with self.lock:
            return sorted(tag for tag, ids in self.by_tag.items() if len(ids) > 1)

    def expected(self) -> list[Effect]:
        """The model: every effect of every plan whose approval the shim accepted."""
        with self.lock:
            seen: set[str] = set()
            out: list[Effect] = []
            for entry in self.entries.values():
                if entry.decision == "approved" and entry.planned.tag not in seen:
                    seen.add(entry.planned.tag)
                    out.extend(entry.planned.effects)
            return out
