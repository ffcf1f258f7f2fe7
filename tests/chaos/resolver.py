"""The harness as operator: it resolves every in-doubt call from the sink's truth.

A run whose call to a callee without idempotency keys was interrupted waits
in ``needs_operator``. The resolver finds the ``in_doubt`` ledger entry, asks
the sink whether that effect arrived, and answers ``applied`` or
``not_applied`` (``POST /calls/{op_key}/resolve``). A shell step has no
outside witness; its command only reads, so running it again is harmless and
the resolver answers ``not_applied``. Every flag is kept for the checker.
"""

from __future__ import annotations

import threading

from tests.chaos.book import RunBook
from tests.chaos.checker import Flag
from tests.chaos.client import Api, Figures, say
from tests.chaos.model import Channel
from tests.chaos.sink import Sink

__all__ = ["Resolver"]


class Resolver:
    def __init__(self, api: Api, sink: Sink, book: RunBook, figures: Figures) -> None:
        self.api = api
        self.sink = sink
        self.book = book
        self.figures = figures
        self.flags: dict[str, Flag] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="chaos-resolver", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    def _loop(self) -> None:
        while not self._stop.wait(0.5):
            try:
                self.sweep()
            except (TimeoutError, AssertionError) as exc:
                say(f"resolver: {exc}")

    def resolve_run(self, run_id: str) -> int:
        """Resolve the run's in-doubt calls; how many were resolved."""
        ledger = self.api.json("GET", f"/runs/{run_id}/ledger", "operator")
        done = 0
        for call in ledger["calls"]:
            if call["status"] != "in_doubt":
                continue
            op_key = str(call["op_key"])
            effect = self.book.effect(run_id, str(call["step_id"]))
            truth: bool | None = None
            if effect is not None and effect.channel in (Channel.KEYED, Channel.UNKEYED):
                truth = self.sink.applications(effect.effect_id) > 0
            outcome = "applied" if truth else "not_applied"
            r = self.api.call(
                "POST",
                f"/calls/{op_key}/resolve",
                "operator",
                {"outcome": outcome, "note": f"chaos harness: the sink says applied={truth}"},
            )
            if r.status_code != 200:
                self.figures.fail(f"resolve {op_key[:12]} answered {r.status_code}: {r.text[:300]}")
                continue
            effect_id = effect.effect_id if effect is not None else f"{run_id}.{call['step_id']}"
            with self._lock:
                first = op_key not in self.flags
                self.flags[op_key] = Flag(effect_id, op_key, outcome, truth)
            if first:
                self.figures.add("in_doubt_resolved")
                self.figures.add(f"in_doubt_resolved_{outcome}")
                say(f"resolved in-doubt call {op_key[:12]} of {effect_id} as {outcome}")
            done += 1
        return done

    def sweep(self) -> int:
        resolved = 0
        for entry in self.book.all():
            if entry.status in ("succeeded", "failed", "rejected", "planned"):
                continue
            view = self.api.json("GET", f"/runs/{entry.run_id}", "operator")
            entry.status = str(view["status"])
            if entry.status == "needs_operator":
                resolved += self.resolve_run(entry.run_id)
        return resolved

    def all_flags(self) -> list[Flag]:
        with self._lock:
            return list(self.flags.values())
