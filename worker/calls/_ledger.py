"""A provider or tool call through the op_key ledger, exactly once per op_key.

Every planner, tool and explain call goes through ``through_ledger``, which
the live worker runs in its workflow's body (``worker.durable``) and a replay
never runs (it reads the ledger). The ledger is the call's checkpoint: no DBOS
step wraps it, and a workflow DBOS re-executes after a crash runs the code
again and is answered here. The call:

* claims the op_key (``started``) — a row found instead is answered from, and
  nothing is called (an earlier execution's call, or a replay);
* calls, completes the row and returns. A tool call checks for a cancel at
  its step's boundary in the claim's transaction (only when nobody claimed
  the key yet: a call already made is answered whatever came since) and
  writes its step's record in the completion's, so one call is two
  transactions, the claim and the completion;
* finds a ``started`` row it did not finish (a crash mid-call): callees that
  de-duplicate on the op_key (noop, http, the planners) are called again
  with the same key, the re-send recorded first in a transaction of its own
  (the one case of three); a callee that can be asked (OpenCode) is reconciled —
  the finished turn is recorded, or the half-done one undone and reported
  ``turn_interrupted`` — and never sent again; any other callee is *in
  doubt* and is not called again — the step reports ``call_in_doubt`` so a
  person decides.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TypeVar

from sqlalchemy.engine import Connection
from tenacity import RetryCallState, Retrying, retry_if_exception, wait_exponential

from contracts import ErrorCode, GatehouseError, JsonObject, JsonValue, digest_of
from ledger import calls, chain, database_unreachable, events, evidence, storage_full
from worker.handlers import Artifact, HandlerResult
from worker.runtime import annotate, call_span, maybe_crash, runtime

__all__ = ["Call", "Performed", "Prepared", "performed", "refusal", "settled", "through_ledger"]

_log = logging.getLogger("gatehouse.calls")
T = TypeVar("T")
# Waiting out a lost database inside a call: first retry after this, doubling to the cap.
_DB_RETRY_FIRST_S = 0.25
_DB_RETRY_CAP_S = 5.0
_RESENT_WHY = (
    "its claim was interrupted before its completion was recorded (a worker stopped);"
    " it may or may not have reached the callee, which de-duplicates on the op_key"
)


@dataclass(frozen=True)
class Performed:
    ok: bool
    output: JsonObject
    error_code: ErrorCode | None = None
    error_message: str | None = None
    artifacts: tuple[Artifact, ...] = ()
    # A tool call's ExecutionResult, less what the fields above already hold
    # (output, artifacts): envelope_id, status, error, metrics.
    result: JsonObject | None = None

    def response(self, artifact_refs: list[JsonValue]) -> JsonObject:
        """What the ledger records for this call."""
        recorded: JsonObject = {
            "ok": self.ok,
            "output": self.output,
            "error_code": None if self.error_code is None else self.error_code.value,
            "error_message": self.error_message,
            "artifacts": artifact_refs,
        }
        if self.result is not None:
            recorded["result"] = self.result
        return recorded


def _worth_retrying(exc: BaseException) -> bool:
    """A ledger transaction worth trying again: the database lost or full, or a
    completion whose chain head moved under it (``chain.head_moved``)."""
    return storage_full(exc) or database_unreachable(exc) or chain.head_moved(exc)


def _say_retrying(state: RetryCallState) -> None:
    failed = state.outcome.exception() if state.outcome is not None else None
    why = "the database cannot be reached"
    if failed is not None and storage_full(failed):
        why = "the disk is full"
    elif failed is not None and chain.head_moved(failed):
        why = "another link was added to the run's chain meanwhile"
    pause = state.next_action.sleep if state.next_action is not None else 0.0
    _log.warning("ledger: %s; retrying the write in %.1f s", why, pause)


def _ledger_attempts() -> Retrying:
    """The attempts at one ledger transaction, tried again until the database answers.

    A lost database must not fail the call: the workflow would end with it. Retrying
    here, with what the callee answered still in hand, also keeps an outage between
    the effect and its completion from turning a finished call into an in-doubt one.
    Each attempt runs in the caller's frame (``for attempt in _ledger_attempts():``
    then ``with attempt, _transaction() as conn:``), so the call's path to its INSERT
    passes no frame of a retry helper.
    """
    return Retrying(
        retry=retry_if_exception(_worth_retrying),
        wait=wait_exponential(multiplier=_DB_RETRY_FIRST_S, max=_DB_RETRY_CAP_S),
        before_sleep=_say_retrying,
        reraise=True,
    )


@contextmanager
def _transaction() -> Iterator[Connection]:
    """One ledger transaction; the run's events, and the writes nothing in it reads
    back (a step's row, its episode, the run's budgets), written together at its end:
    on PostgreSQL in one statement (``events.batched``)."""
    with runtime().db.engine.begin() as conn, events.batched(conn, writes=True):
        yield conn


def _ledger_tx(fn: Callable[[Connection], T]) -> T:
    """``fn`` in one ledger transaction, tried as ``_ledger_attempts`` tries."""
    for attempt in _ledger_attempts():
        with attempt, _transaction() as conn:
            return fn(conn)
    raise AssertionError("unreachable")  # pragma: no cover - the attempts end in a return


@dataclass(frozen=True)
class Call:
    """One provider or tool call, as the ledger identifies and records it."""

    run_id: str
    step_id: str
    attempt: int
    kind: str  # provider | tool
    target: str  # the driver kind or planner
    request: JsonObject  # what is sent; its digest is recorded
    idempotent: bool  # the callee de-duplicates on the op_key (may be sent again)
    # For a callee that can say what became of an interrupted call (an OpenCode
    # session keeps its turns): settles it without sending it again, or None
    # when it was certainly never sent (then it is sent now, for the first time).
    reconcile: Callable[[str], Performed | None] | None = field(default=None, compare=False)
    # Run in the claim's transaction first, given what the claim's one read found
    # (``calls.Look``): an answer stops the call before it is claimed (a cancel
    # seen at the step's boundary).
    boundary: Callable[[Connection, calls.Look], JsonObject | None] | None = field(
        default=None, compare=False
    )
    # The DBOS workflow making the call: the claim's read also says whether DBOS
    # holds it cancelled (``calls.Look.workflow_cancelled``), for the boundary to act on.
    workflow_id: str | None = None
    # Run in the completion's transaction (or, for an answer the ledger already
    # had, in one of its own) with the call's result: fields added to the result
    # (the step's record, written with its call). It must be idempotent.
    settle: Callable[[Connection, JsonObject], JsonObject] | None = field(
        default=None, compare=False
    )

    @property
    def op_key(self) -> str:
        return calls.op_key(self.run_id, self.step_id, self.attempt)

    def result(
        self, response: JsonObject, from_ledger: bool, duration_ms: int | None = None
    ) -> JsonObject:
        """What the step returns: the recorded response, what the trace digest needs,
        and what the budgets count (the target, the ledger row's recorded duration;
        both outside the response digest, and the same in a replay)."""
        return {
            "op_key": self.op_key,
            "step_id": self.step_id,
            "target": self.target,
            "attempt": self.attempt,
            "duration_ms": duration_ms,
            "from_ledger": from_ledger,
            "request_digest": digest_of(self.request),
            "response_digest": digest_of(response),
            **response,
        }

    def in_doubt(self) -> JsonObject:
        """The response of an interrupted call whose effect nobody can know."""
        return {
            "ok": False,
            "output": {"op_key": self.op_key, "step_id": self.step_id, "target": self.target},
            "error_code": ErrorCode.CALL_IN_DOUBT.value,
            "error_message": f"the {self.target} call for step {self.step_id!r} was interrupted"
            " after it started; it may or may not have taken effect",
            "artifacts": [],
        }


def through_ledger(call: Call, perform: Callable[[str], Performed]) -> JsonObject:
    """Run one call exactly once per op_key; return the recorded response.

    A ledger row that fails validation stops this call (``corrupt_record``):
    nothing is called on the strength of a record that cannot be trusted. From
    the flow's port to the claim's INSERT this is one frame of the path (see
    docs/architecture.md), so the call is one function rather than a wrapper around it.
    """
    corrupt = _CorruptRecord()
    with call_span(call.kind, call.target, call.op_key), corrupt:
        rt = runtime()
        key = call.op_key
        annotate(run_id=call.run_id, step_id=call.step_id, attempt=call.attempt, op_key=key,
                 kind=call.kind, target=call.target)  # fmt: skip
        maybe_crash(rt.settings.crash_point, "before_claim", call.step_id)
        # One transaction: the boundary check of a call nobody made, then the claim (or
        # the row a claim that lost found); tried in this frame, not behind a callback.
        for attempt in _ledger_attempts():
            with attempt, _transaction() as conn:
                claimed = _claim(conn, call)
        if isinstance(claimed, dict):
            return claimed  # stopped at the boundary: nothing claimed, nothing called
        row = claimed
        if row is not None and row.status not in calls.UNFINISHED and row.response is not None:
            if row.status in calls.RESOLVED:  # an operator settled an interrupted call
                return call.result(call.in_doubt(), from_ledger=True)
            served = call.result(row.response, from_ledger=True, duration_ms=row.duration_ms)
            if call.settle is None:
                return served
            settle = call.settle
            return {**served, **_ledger_tx(lambda conn: settle(conn, served))}
        # A claim nobody completed means this call was interrupted mid-flight. The
        # workflow's next step marks the row in doubt, with the run's status.
        settled: Performed | None = None
        if row is not None:
            same = row.status != "in_doubt" and row.request_digest == digest_of(call.request)
            if not same or (call.reconcile is None and not call.idempotent):
                return call.result(call.in_doubt(), from_ledger=False)
            if call.reconcile is not None:
                try:
                    settled = call.reconcile(key)
                except GatehouseError as exc:  # the callee cannot be asked: record why
                    settled = refusal(exc)
            else:  # a callee that de-duplicates: sent again under its key, on record first
                executor = rt.settings.executor_id
                _ledger_tx(lambda conn: calls.resent(conn, key, _RESENT_WHY, executor))
        maybe_crash(rt.settings.crash_point, "after_claim", call.step_id)
        started = time.monotonic()
        performed = settled if settled is not None else perform(key)
        maybe_crash(rt.settings.crash_point, "after_effect", call.step_id)
        duration_ms = int((time.monotonic() - started) * 1000)
        done = _ledger_tx(lambda conn: _complete(conn, call, performed, duration_ms))
        maybe_crash(rt.settings.crash_point, "after_completion", call.step_id)
        return done
    assert corrupt.error is not None  # the with block returns unless it was refused
    return call.result(refusal(corrupt.error).response([]), False)


def _complete(conn: Connection, call: Call, performed: Performed, duration_ms: int) -> JsonObject:
    """The completion's transaction: the artifacts, the row's outcome read back, and
    what the caller writes with it (the step's own record): one commit."""
    refs: list[JsonValue] = []
    for art in performed.artifacts:
        digest = evidence.put_artifact(
            conn,
            run_id=call.run_id,
            step_id=call.step_id,
            name=art.name,
            media_type=art.media_type,
            content=art.content,
        )
        refs.append(
            {
                "name": art.name,
                "sha256": digest,
                "media_type": art.media_type,
                "size_bytes": len(art.content),
            }
        )
    response = performed.response(refs)
    recorded = calls.complete(
        conn,
        key=call.op_key,
        run_id=call.run_id,
        response=response,
        ok=performed.ok,
        error_code=response["error_code"] if isinstance(response["error_code"], str) else None,
        duration_ms=duration_ms,
    )
    if recorded.response is None:  # pragma: no cover - complete() just wrote it
        raise GatehouseError(ErrorCode.CORRUPT_RECORD, "completed call has no response")
    result = call.result(recorded.response, from_ledger=False, duration_ms=recorded.duration_ms)
    return result if call.settle is None else {**result, **call.settle(conn, result)}


class _CorruptRecord:
    """Holds back a ``corrupt_record`` error from the block it wraps, kept to answer with."""

    error: GatehouseError | None = None

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: object, exc: BaseException | None, tb: object) -> bool:
        if isinstance(exc, GatehouseError) and exc.code is ErrorCode.CORRUPT_RECORD:
            self.error = exc
            return True
        return False


def _claim(conn: Connection, call: Call) -> JsonObject | calls.CallRow | None:
    """The boundary's answer when the call must not be made; else the claim: None
    when this execution claimed the op_key, the row found when it was taken.

    The boundary is checked only for a call nobody has claimed: a call an earlier
    execution made is answered from its row whatever came since (a cancel then
    stops the flow at its next boundary). What the boundary asks (the row, a cancel
    on record, DBOS's word on the workflow) is one read (``calls.look``)."""
    if call.boundary is not None:
        looked = calls.look(conn, call.op_key, call.run_id, call.workflow_id)
        if looked.row is not None:
            return looked.row
        stop = call.boundary(conn, looked)
        if stop is not None:
            return stop
    won = calls.claim(
        conn,
        key=call.op_key,
        run_id=call.run_id,
        step_id=call.step_id,
        attempt=call.attempt,
        kind=call.kind,
        target=call.target,
        request=call.request,
    )
    return None if won else calls.lookup(conn, call.op_key)


def refusal(exc: GatehouseError) -> Performed:
    return Performed(ok=False, output=exc.details, error_code=exc.code, error_message=exc.message)


@dataclass(frozen=True)
class Prepared:
    """A call ready to go through the ledger, or the answer when it was refused
    before anything could be called (nothing to ledger, in either mode)."""

    call: Call | None
    perform: Callable[[str], Performed] | None = None
    refused: JsonObject | None = None

    def answer(self, serve: Callable[[Call, Callable[[str], Performed]], JsonObject]) -> JsonObject:
        """``serve``'s answer for the call: live, ``through_ledger``; in a replay, the ledger."""
        if self.call is None or self.perform is None:
            return self.refused if self.refused is not None else {}
        return serve(self.call, self.perform)


def performed(result: HandlerResult) -> Performed:
    return Performed(
        ok=result.ok,
        output=result.output,
        error_code=result.error_code,
        error_message=result.error_message,
        artifacts=result.artifacts,
    )


def settled(result: HandlerResult | None) -> Performed | None:
    return None if result is None else performed(result)
