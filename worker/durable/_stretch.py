"""The ports of a split run's stretch: live from the wait it resumes at.

A run is split at every human decision. A stretch after a decision starts at
it, from the continuation the park wrote (``worker.flow.resume_intent``), and
every port is live (``LivePorts``). A stretch after another kind of wait (an
input, a call in doubt), or one whose run parked before gatehouse-7, runs the
whole flow (``worker.flow``) again from its start: every port before the wait
the run was parked at is answered from the ledger (``worker.replay.ReplayPorts``:
nothing sent, nothing written; the calls, records and decisions of earlier
stretches are final), and from that wait on every port is live. Stretch 0 is
live from the start. A fork's calls before its fork point are its parent's and
stay answered from the parent's ledger in every stretch.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import TypeVar

from contracts import (
    COMPILE_STEP_ID,
    Continuation,
    ErrorCode,
    GatehouseError,
    JsonObject,
    PlannerCall,
    PolicyProfile,
    StretchJob,
    ToolCall,
)
from ledger.forks import Lineage
from worker.durable._live import LivePorts
from worker.durable._records import Wait
from worker.durable._tx import steady
from worker.flow import (
    COMPILE_REPAIR_ID,
    BeginResult,
    CallOutcome,
    GateResult,
    PlanGated,
    Ports,
    RunEnd,
    StepRecord,
)
from worker.replay import ReplayPorts, lineage_chain
from worker.runtime import runtime

__all__ = ["StretchPorts", "stretch_ports"]

T = TypeVar("T")


class _Ledger:
    """A ``ReplayPorts`` given a pooled connection for each answer only (a stretch
    may run for hours; it holds no connection between its steps)."""

    def __init__(self, ports: ReplayPorts) -> None:
        self.ports = ports

    def answer(self, ask: Callable[[ReplayPorts], T]) -> T:
        def read() -> T:
            with runtime().db.engine.connect() as conn:
                self.ports.conn = conn
                return ask(self.ports)

        return steady(read)


class StretchPorts:
    """``worker.flow.Ports`` for one stretch of a split run (see the module)."""

    def __init__(
        self,
        live: LivePorts,
        ledger: _Ledger | None,
        *,
        resume: StretchJob | None,
        fork_from: int | None,
    ) -> None:
        self.live = live
        self.ledger = ledger
        # Until the wait this stretch resumes at, the ledger answers (None: live from the
        # start). A stretch with a continuation starts at that wait: live from it on.
        continues = resume is not None and resume.continuation is not None
        self.replaying = resume is not None and not continues
        self.resume_wait = 0 if resume is None else resume.resume_wait
        self.until = None if resume is None else resume.until
        self.fork_from = fork_from  # a fork: its parent's calls before this step (1-based)
        self.waits = self.resume_wait if continues else 0

    def _wait_recorded(self) -> bool:
        """At the next of the flow's waits: True while the ledger still answers it;
        from the wait the stretch resumes at on, the live ports are told which wait
        it is (and, for that one, the expiry set when the run first parked there)."""
        index = self.waits
        self.waits += 1
        if self.replaying and index < self.resume_wait:
            return True
        self.replaying = False
        until = self.until if index == self.resume_wait else None
        self.live.wait = Wait(index, None, until)
        return False

    def _parents(self, position: int | None) -> bool:
        """Whether a call is the parent's: a fork's planner call and its steps before
        the fork point (``position`` 0-based; None: the planner call)."""
        if self.fork_from is None:
            return False
        return position is None or position < self.fork_from - 1

    def _from_ledger(self, parents: bool = False) -> bool:
        """Whether the ledger answers: everything before the resumed wait, and a
        fork's calls that are its parent's (``parents``)."""
        return self.ledger is not None and (self.replaying or parents)

    def _ask(self, ask: Callable[[ReplayPorts], T]) -> T:
        assert self.ledger is not None
        return self.ledger.answer(ask)

    # -- the ports
    def begin(self, run_id: str, profile_id: str, tool_pool_id: str) -> BeginResult:
        if self._from_ledger():
            return self._ask(lambda p: p.begin(run_id, profile_id, tool_pool_id))
        return self.live.begin(run_id, profile_id, tool_pool_id)

    def planner_call(self, call: PlannerCall) -> JsonObject:
        # the compile (and its repair) precede every step: a fork's are its parent's
        compiling = call.call_id in (COMPILE_STEP_ID, COMPILE_REPAIR_ID)
        if self._from_ledger(compiling and self._parents(None)):
            return self._ask(lambda p: p.planner_call(call))
        return self.live.planner_call(call)

    def gate_and_card(self, gated: PlanGated) -> GateResult:
        ports: Ports = self.live
        if self._from_ledger():
            assert self.ledger is not None
            ports = self.ledger.ports  # writes nothing: the card is on record
        return ports.gate_and_card(gated)

    def await_decision(
        self,
        run_id: str,
        plan_digest: str,
        profile: PolicyProfile,
        at: str,
        *,
        then: Callable[[], Continuation],
    ) -> tuple[bool, str] | None:
        if self._wait_recorded():
            return self._ask(
                lambda p: p.await_decision(run_id, plan_digest, profile, at, then=then)
            )
        if self.fork_from is not None:  # a fork's stretches answer its parent's calls too
            then = partial(_forked, then, self.fork_from)
        return self.live.await_decision(run_id, plan_digest, profile, at, then=then)

    def await_message(self, run_id: str, turn: int, profile: PolicyProfile) -> JsonObject | None:
        if self._wait_recorded():
            return self._ask(lambda p: p.await_message(run_id, turn, profile))
        return self.live.await_message(run_id, turn, profile)

    def await_resolution(self, run_id: str, op_key: str, step_id: str) -> str:
        if self._wait_recorded():
            return self._ask(lambda p: p.await_resolution(run_id, op_key, step_id))
        return self.live.await_resolution(run_id, op_key, step_id)

    def verify_plan(self, run_id: str, plan_digest: str) -> GateResult:
        if self._from_ledger():
            return self._ask(lambda p: p.verify_plan(run_id, plan_digest))
        return self.live.verify_plan(run_id, plan_digest)

    def tool_call(self, call: ToolCall) -> CallOutcome:
        if self._from_ledger(self._parents(call.position)):
            return self._ask(lambda p: p.tool_call(call))
        return self.live.tool_call(call)

    def cancelled(self, run_id: str, at: str) -> JsonObject | None:
        if self._from_ledger():
            return self._ask(lambda p: p.cancelled(run_id, at))
        return self.live.cancelled(run_id, at)

    def pause(self, seconds: float) -> None:
        if not self.replaying:
            self.live.pause(seconds)

    def record_step_result(self, record: StepRecord) -> JsonObject:
        if self._from_ledger(self._parents(record.position)):
            return self._ask(lambda p: p.record_step_result(record))
        return self.live.record_step_result(record)

    def finish(self, end: RunEnd) -> None:
        self.live.finish(end)


def _forked(then: Callable[[], Continuation], fork_from: int) -> Continuation:
    """A fork's continuation: it names the fork point, so its next stretch answers the
    parent's calls before it from the parent's ledger."""
    return then().model_copy(update={"fork_from_step": fork_from})


def stretch_ports(
    run_id: str,
    resume: StretchJob | None,
    *,
    chain: list[Lineage] | None = None,
    fork_from: int | None = None,
) -> StretchPorts:
    """The ports of one stretch of ``run_id``. ``resume``: where a later stretch picks
    up (None for stretch 0); ``chain``: the run's lineage, if already read; ``fork_from``:
    a fork's fork point, from its job. Stretch 0 of a run that is no fork needs no
    ledger, so nothing is read for it."""
    live = LivePorts(parks=True)
    if resume is not None and resume.continuation is not None:
        live.decided = resume.decided
    if fork_from is None and (resume is None or resume.continuation is not None):
        # stretch 0, or a stretch from its continuation: nothing is answered from the ledger
        return StretchPorts(live, None, resume=resume, fork_from=None)
    rt = runtime()
    if chain is None:
        chain = steady(lambda: lineage_chain(rt.db, run_id))
    if not chain:
        raise GatehouseError(ErrorCode.RUN_NOT_FOUND, f"a stretch of {run_id!r}, which has no run")
    # given a connection for each answer (``_Ledger.answer``), never held
    ledger = _Ledger(ReplayPorts(None, rt.settings, chain))
    return StretchPorts(live, ledger, resume=resume, fork_from=chain[0].fork_from_step)
