"""The explain skill: a model writes a ``human_ui`` report from a finished run's evidence.

One provider call through the op_key ledger, ledger step id ``@explain``
(``op_key = sha256(run_id, "@explain", attempt)``), kind ``provider``, target
``openai_compat``, so it is counted, chained and served like every other call:

* the request is built from the evidence only (``worker/explain/_request.py``),
  so asking again about the same run builds the same request, finds the
  completed entry with that request digest and returns its report with no
  outbound call (``from_ledger``);
* a failed attempt (model unreachable, ``explain_invalid``) stays recorded as
  failed; the next ask is a new attempt under a new op_key. An entry for other
  evidence (a different model name, say) is passed over the same way;
* every attempt leaves one ``execution/explain`` episode that names the report
  by digest (the report's text is ``human_ui``; episodes are ``system_log``).

``replay_explain`` answers from the ledger alone — nothing sent, nothing
written. The ``gatehouse.explain`` workflow lets the shim ask a worker (the
shim never imports this package). The report never feeds a plan: nothing in
the planner or the gate reads it (``tests/static/test_explain_isolation.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import ValidationError

from contracts import (
    EXPLAIN_REPORT_SCHEMA_ID,
    DataRef,
    ErrorCode,
    ExplainReport,
    ExplainView,
    GatehouseError,
    JsonObject,
    RunView,
    digest_of,
)
from ledger import Database, call_views, calls, evidence, now_iso, run_views
from policies.episodes import episode
from worker.calls import Call, Performed, refusal, through_ledger
from worker.explain._model import explain_request_body, explain_with_model
from worker.explain._request import (
    EXPLAIN_EPISODE_TYPE,
    EXPLAIN_STEP_ID,
    check_report,
    explain_prompt,
    explain_seed,
    run_evidence,
)
from worker.planners import ModelSettings
from worker.runtime import WorkerSettings

__all__ = ["ExplainAsk", "explain_run", "prepare_explain", "replay_explain"]

_TARGET = "openai_compat"


@dataclass(frozen=True)
class ExplainAsk:
    """One explain, ready to go through the ledger: what is sent, and from what."""

    run_id: str
    evidence: JsonObject
    model: ModelSettings
    body: JsonObject

    @property
    def request(self) -> JsonObject:
        """What the ledger records (and hashes) as the call's request."""
        return {"skill": "explain", "provider": _TARGET, "body": self.body}

    @property
    def evidence_digest(self) -> str:
        return digest_of(self.evidence)

    def call(self, attempt: int) -> Call:
        # idempotent: the model is only read from, and gets the op_key as its
        # Idempotency-Key, so an interrupted explain may be sent again.
        return Call(
            run_id=self.run_id,
            step_id=EXPLAIN_STEP_ID,
            attempt=attempt,
            kind="provider",
            target=_TARGET,
            request=self.request,
            idempotent=True,
        )

    def perform(self, key: str) -> Performed:
        try:
            answer = explain_with_model(self.model, self.body, key)
            report = check_report(answer, self.evidence)
        except GatehouseError as exc:
            return refusal(exc)
        return Performed(ok=True, output={"report": report.model_dump(mode="json")})


def _finished_run(db: Database, run_id: str) -> tuple[RunView, JsonObject]:
    with db.engine.connect() as conn:
        run = run_views.get_run(conn, run_id, {})
        if run is None:
            raise GatehouseError(ErrorCode.RUN_NOT_FOUND, f"no run {run_id!r}")
        if not run.status.terminal:
            raise GatehouseError(
                ErrorCode.RUN_NOT_FINISHED,
                f"run {run_id!r} is {run.status.value}; only a finished run can be explained",
                {"status": run.status.value},
            )
        ledger_rows = call_views.list_calls(conn, run_id)
        episodes = evidence.list_episodes(conn, run_id)
    return run, run_evidence(run, ledger_rows, episodes)


def prepare_explain(db: Database, settings: WorkerSettings, run_id: str) -> ExplainAsk:
    """Read the finished run's evidence and build the request (no model is asked)."""
    run, found = _finished_run(db, run_id)
    if settings.model_base_url is None:
        raise GatehouseError(
            ErrorCode.EXPLAIN_UNAVAILABLE,
            "explain needs a model; set GATEHOUSE_MODEL_BASE_URL on the workers",
        )
    model = ModelSettings(
        base_url=settings.model_base_url, model=settings.model_name, api_key=settings.model_api_key
    )
    system, user = explain_prompt(run_id, found)
    body = explain_request_body(model, system, user, explain_seed(run.random_seed, run_id))
    return ExplainAsk(run_id=run_id, evidence=found, model=model, body=body)


def _attempt(db: Database, ask: ExplainAsk, *, recorded_only: bool) -> int | None:
    """The attempt this ask goes under: the completed (or, live, unfinished) entry
    of the same request, else the first unused attempt. ``recorded_only``: only a
    completed entry of the same request, or None."""
    wanted = digest_of(ask.request)
    attempt = 1
    with db.engine.connect() as conn:
        while (row := calls.lookup(conn, ask.call(attempt).op_key)) is not None:
            if row.request_digest == wanted and (
                row.status == "completed" or (not recorded_only and row.status == "started")
            ):
                return attempt
            attempt += 1
    return None if recorded_only else attempt


def _code(value: object) -> ErrorCode:
    try:
        return ErrorCode(value)
    except ValueError:
        return ErrorCode.CORRUPT_RECORD


def _view(ask: ExplainAsk, result: JsonObject) -> ExplainView:
    """The step's (or the ledger's) answer as the API's view, or its error."""
    if result.get("ok") is not True:
        output = result.get("output")
        raise GatehouseError(
            _code(result.get("error_code")),
            str(result.get("error_message")),
            {"op_key": result.get("op_key"), **(output if isinstance(output, dict) else {})},
        )
    output = result.get("output")
    try:
        report = ExplainReport.model_validate(
            output.get("report") if isinstance(output, dict) else None
        )
    except ValidationError as exc:
        raise GatehouseError(
            ErrorCode.CORRUPT_RECORD,
            "a recorded explain report breaks its contract",
            {"op_key": result.get("op_key")},
        ) from exc
    attempt = result.get("attempt")
    return ExplainView(
        run_id=ask.run_id,
        report=report,
        report_digest=digest_of(report.model_dump(mode="json")),
        op_key=str(result.get("op_key")),
        attempt=attempt if isinstance(attempt, int) else 1,
        from_ledger=result.get("from_ledger") is True,
        request_digest=digest_of(ask.request),
        evidence_digest=ask.evidence_digest,
        model=ask.model.model,
    )


def _record_episode(
    db: Database, settings: WorkerSettings, ask: ExplainAsk, call: Call, result: JsonObject
) -> None:
    """One episode per attempt (its id comes from the op_key: a second ask writes none)."""
    ok = result.get("ok") is True
    output = result.get("output")
    report = output.get("report") if ok and isinstance(output, dict) else None
    outputs = []
    if report is not None:
        outputs.append(
            DataRef(
                data_type=EXPLAIN_REPORT_SCHEMA_ID, data_id=call.op_key, sha256=digest_of(report)
            )
        )
    code = result.get("error_code")
    summary = (
        f"explain report of run {ask.run_id} written by model {ask.model.model}"
        f" (attempt {call.attempt})"
        if ok
        else f"explain of run {ask.run_id} failed: {code} (attempt {call.attempt})"
    )
    built = episode(
        run_id=ask.run_id,
        kind="explain",
        subject=call.op_key,
        episode_type=EXPLAIN_EPISODE_TYPE,
        status="completed" if ok else "failed",
        summary=summary,
        executor_id=settings.executor_id,
        recorded_at=now_iso(),
        details={
            "op_key": call.op_key,
            "attempt": call.attempt,
            "model": ask.model.model,
            "request_digest": digest_of(ask.request),
            "evidence_digest": ask.evidence_digest,
            "error_code": code if isinstance(code, str) else None,
        },
        inputs=[DataRef(data_type="gatehouse.explain_evidence", sha256=ask.evidence_digest)],
        outputs=outputs,
    )
    with db.engine.begin() as conn:
        evidence.put_episode(conn, ask.run_id, EXPLAIN_STEP_ID, built)


def explain_run(db: Database, settings: WorkerSettings, run_id: str) -> ExplainView:
    """Explain a finished run: the recorded report of this evidence, or a new model call."""
    ask = prepare_explain(db, settings, run_id)
    attempt = _attempt(db, ask, recorded_only=False)
    call = ask.call(attempt if attempt is not None else 1)
    result = through_ledger(call, ask.perform)
    _record_episode(db, settings, ask, call, result)
    return _view(ask, result)


def replay_explain(db: Database, settings: WorkerSettings, run_id: str) -> ExplainView:
    """The recorded report of this run's evidence, from the ledger alone: no model is
    asked and nothing is written. ``call_not_found`` when none was recorded."""
    ask = prepare_explain(db, settings, run_id)
    attempt = _attempt(db, ask, recorded_only=True)
    if attempt is None:
        raise GatehouseError(
            ErrorCode.CALL_NOT_FOUND,
            f"the ledger holds no completed explain of run {run_id!r} for this evidence",
            {"request_digest": digest_of(ask.request)},
        )
    call = ask.call(attempt)
    with db.engine.connect() as conn:
        row = calls.lookup(conn, call.op_key)
    if row is None or row.response is None:  # pragma: no cover - _attempt just read it
        raise GatehouseError(ErrorCode.CORRUPT_RECORD, "a completed explain has no response")
    return _view(ask, call.result(row.response, from_ledger=True))
