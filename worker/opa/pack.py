"""The run's output archive, packed when the run ends.

What the run wrote under ``<workspace>/output/`` becomes artifacts of the run
(``output/<path>``, by SHA-256, in its evidence) and, with the archive's data
and prompt, its unknown ``META-INF/extensions/`` and a session history that
now ends with this run (the prompt as a user message, what the run did as the
assistant's), a new archive: ``output.opa``, signed when the worker has a
signing key. Submitted again, it is the next run of the same session.

Packing reads only this worker's workspace and the ledger. The live worker runs
it as a DBOS step (``worker.durable``): a run recovered after it completed keeps
what it packed; packed again (a crash
inside it), the archive holds the same files and a later history timestamp.
"""

from __future__ import annotations

import datetime as dt
import logging
from pathlib import Path

from contracts import GatehouseError, JsonObject, JsonValue
from contracts.opa_run import OPA_DIR, OPA_STEP, OUTPUT_DIR, OpaJob
from ledger import evidence, opa_runs
from opa_format import ArchiveLimits, History, HistoryMessage, write_archive
from worker.opa.unpack import accepted_archive, unpack
from worker.runtime import runtime

__all__ = ["pack_output"]

_log = logging.getLogger("gatehouse.opa")


def _files(root: Path) -> dict[str, bytes]:
    """Regular files below ``root`` by relative POSIX path; links are not followed."""
    out: dict[str, bytes] = {}
    if not root.is_dir() or root.is_symlink():
        return out
    for path in sorted(root.rglob("*")):
        if path.is_file() and not path.is_symlink():
            out[path.relative_to(root).as_posix()] = path.read_bytes()
    return out


def _steps(steps: list[JsonValue]) -> list[str]:
    lines = []
    for step in steps:
        if isinstance(step, dict):
            mark = "ok" if step.get("ok") else f"failed ({step.get('error_code')})"
            lines.append(f"- step {step.get('step_id')}: {mark}")
    return lines


def _turns(
    prompt: str, steps: list[JsonValue], follow_ups: list[JsonValue]
) -> list[tuple[str, str]]:
    """(what the user asked, what the run did) per turn: the prompt, then each follow-up."""
    asked = [prompt] + [str(f.get("text")) for f in follow_ups if isinstance(f, dict)]
    cuts = [0]
    for f in follow_ups:
        after = f.get("after_step") if isinstance(f, dict) else None
        if isinstance(after, int):
            cuts.append(after)
    return [
        (text, "\n".join(_steps(steps[cuts[i] : cuts[i + 1] if i + 1 < len(cuts) else None])))
        for i, text in enumerate(asked[: len(cuts)])
    ]


def _account(run_id: str, status: str, code: str | None) -> str:
    return f"Gatehouse run {run_id} ended {status}" + (f" ({code})" if code else "") + "."


def _history(
    old: History | None, turns: list[tuple[str, str]], account: str, meta: JsonObject
) -> History:
    """The archive's history with this run's turns appended; the last answer says how it ended."""
    now = dt.datetime.now(dt.UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
    messages = list(old.messages) if old is not None else []
    for i, (asked, did) in enumerate(turns):
        last = i == len(turns) - 1
        answer = "\n".join(p for p in (account if last else "", did) if p)
        messages.append(HistoryMessage(role="user", content=asked, timestamp=now))
        messages.append(
            HistoryMessage(
                role="assistant", content=answer, timestamp=now, metadata={**meta, "turn": i + 1}
            )
        )
    if old is None:
        return History(opa_version="0.1", created_at=now, updated_at=now, messages=messages)
    return old.model_copy(
        update={"messages": messages, "updated_at": now, "created_at": old.created_at or now}
    )


def _pack(raw: JsonObject) -> JsonObject:
    job = OpaJob.model_validate(raw["opa"])
    run_id, status = str(raw["run_id"]), str(raw["status"])
    code = raw.get("error_code")
    steps = raw.get("steps")
    rt = runtime()
    workspace = rt.settings.workspace_root / run_id
    workspace.mkdir(parents=True, exist_ok=True)
    try:
        source = accepted_archive(rt.settings, job)  # read once, for the unpack too
        unpack(rt.settings, workspace, job, source)
    except GatehouseError as exc:
        _log.warning("run %s: no output archive: %s", run_id, exc.message)
        return {"packed": False, "error_code": exc.code.value, "error_message": exc.message}
    data_root = job.data_root.strip("/")
    files = {f"{data_root}/{k}": v for k, v in _files(workspace / OPA_DIR / data_root).items()}
    outputs = _files(workspace / OUTPUT_DIR)
    files.update({f"{OUTPUT_DIR}/{k}": v for k, v in outputs.items()})
    meta: JsonObject = {"gatehouse_run_id": run_id, "status": status, "error_code": code}
    account = _account(run_id, status, code if isinstance(code, str) else None)
    follow_ups = raw.get("follow_ups")
    turns = _turns(
        source.prompt,
        steps if isinstance(steps, list) else [],
        follow_ups if isinstance(follow_ups, list) else [],
    )
    try:
        packed = write_archive(
            prompt=source.prompt,
            manifest=source.manifest,
            history=_history(source.history, turns, account, meta),
            files=files,
            keep_extensions_from=source,
            signing_key=rt.settings.opa_signing_key,
            limits=ArchiveLimits(),
        )
    except GatehouseError as exc:
        _log.warning("run %s: the output archive could not be written: %s", run_id, exc.message)
        return {"packed": False, "error_code": exc.code.value, "error_message": exc.message}
    listed: list[JsonValue] = []
    with rt.db.engine.begin() as conn:
        for name, content in sorted(outputs.items()):
            digest = evidence.put_artifact(
                conn,
                run_id=run_id,
                step_id=OPA_STEP,
                name=f"{OUTPUT_DIR}/{name}",
                media_type="application/octet-stream",
                content=content,
            )
            listed.append({"path": f"{OUTPUT_DIR}/{name}", "sha256": digest, "size": len(content)})
        digest = opa_runs.put_output(conn, run_id, packed)
    return {"packed": True, "output_sha256": digest, "outputs": listed}


def pack_output(raw: JsonObject) -> JsonObject:
    """Pack the run's output archive (``raw``: run_id, status, error_code, steps, opa)."""
    return _pack(raw)
