"""One OpenCode turn: a prompt in the run's session, watched until it ends.

While the turn runs, every event for its session is read (``worker.opencode.watch``):

* the permission gate answers each ``permission.asked`` from the policy
  profile (``once`` or ``reject``) at once, and a reject is evidence for a
  security episode; an ask still pending past the limit fails the turn;
* the stall detector treats each event as the turn's heartbeat; no event for
  ``stall_s`` (or a session stuck ``busy`` with none), or a turn past its
  deadline, aborts the session, records diagnostics and reverts the turn;
* a ``session.created`` with a parent (a child session) aborts the turn and
  reverts it, and so does a build turn that spends past what the run has left
  of its budgets (tokens, cost, wall time: the envelope's allowance);
* tool parts, ``file.edited`` and permission events become the turn's
  activity, with file digests before and after.

A turn that did not finish cleanly leaves the workspace byte-identical to
before it (OpenCode's revert, then the snapshot if the revert fell short), and
says so with both digests. ``reconcile`` settles a turn a crash cut off.
"""

from __future__ import annotations

import json

from contracts import ErrorCode, GatehouseError, JsonObject, JsonValue, OpencodePolicy
from worker.handlers import Artifact, HandlerResult
from worker.handlers.opencode import workspace
from worker.handlers.opencode.client import OpencodeClient
from worker.handlers.opencode.config import PROVIDER_ID
from worker.handlers.opencode.events import EventFeed
from worker.handlers.opencode.supervisor import OpencodeServer
from worker.handlers.opencode.watch import (
    LAST_EVENTS,
    TurnSpec,
    Watch,
    cap,
    child_attempt,
    marker_of,
    watch_turn,
)

__all__ = ["TurnSpec", "marker_of", "reconcile", "run_turn", "session_for"]


def _title(run_id: str) -> str:
    return f"gatehouse run {run_id}"


def session_for(client: OpencodeClient, run_id: str, policy: OpencodePolicy) -> str:
    """The run's one session in this server (found by title, or created)."""
    for session in client.sessions():
        if session.get("title") == _title(run_id) and isinstance(session.get("id"), str):
            return str(session["id"])
    rules: list[JsonValue] = [
        {"permission": name, "pattern": "*", "action": action}
        for name, action in sorted(policy.permissions.items())
    ]
    created = client.create_session(_title(run_id), rules)
    session_id = created.get("id")
    if not isinstance(session_id, str):
        raise GatehouseError(
            ErrorCode.EXECUTOR_UNAVAILABLE, "OpenCode created a session with no id"
        )
    return session_id


def _ours(messages: list[JsonObject], marker: str) -> tuple[JsonObject | None, list[JsonObject]]:
    """(our user message, the assistant messages after it), in the session's order."""
    user: JsonObject | None = None
    replies: list[JsonObject] = []
    for message in messages:
        info = message.get("info")
        if not isinstance(info, dict):
            continue
        if info.get("role") == "user":
            if user is not None:
                break  # the next turn's prompt
            parts = message.get("parts")
            texts = [
                str(p.get("text", ""))
                for p in (parts if isinstance(parts, list) else [])
                if isinstance(p, dict) and p.get("type") == "text"
            ]
            if any(marker in t for t in texts):
                user = message
        elif user is not None and info.get("role") == "assistant":
            replies.append(message)
    return user, replies


def _recent_messages(client: OpencodeClient, session_id: str, marker: str) -> list[JsonObject]:
    """The session's latest messages, enough of them to hold the turn with ``marker``.

    Asked for in growing windows: OpenCode 1.18 fails (HTTP 400) to list a
    message that asked for structured output, so the window stops short of
    one, and what was listed before the failure is what there is.
    """
    found: list[JsonObject] = []
    limit = 8
    while limit <= 4096:
        try:
            batch = client.messages(session_id, limit)
        except GatehouseError:
            return found
        found = batch
        if len(batch) < limit or _ours(batch, marker)[0] is not None:
            return found
        limit *= 4
    return found


def _message_id(message: JsonObject | None) -> str | None:
    info = message.get("info") if message is not None else None
    mid = info.get("id") if isinstance(info, dict) else None
    return mid if isinstance(mid, str) else None


def _finished(replies: list[JsonObject]) -> bool:
    if not replies:
        return False
    info = replies[-1].get("info")
    if not isinstance(info, dict):
        return False
    times = info.get("time")
    done = isinstance(times, dict) and times.get("completed") is not None
    return done and info.get("finish") not in (None, "tool-calls", "unknown")


def _log_artifact(spec: TurnSpec, events: list[JsonObject]) -> Artifact:
    """The turn's event log, channel system_log, capped at the connector's output limit."""
    lines = [json.dumps(e, sort_keys=True, separators=(",", ":")) for e in events]
    data = "\n".join(lines).encode("utf-8")[: spec.max_output_bytes]
    return Artifact(
        name=f"opencode-events-{spec.op_key[:12]}.jsonl",
        media_type="application/x-ndjson",
        content=data,
    )


def _base(spec: TurnSpec, server: OpencodeServer, session_id: str) -> JsonObject:
    return {
        "executor": "opencode",
        "opencode": {"version": server.pin.version, "integrity": server.pin.integrity},
        "sandbox": dict(server.sandbox),  # what the server runs in (worker/sandbox/server.py)
        "session_id": session_id,
        "agent": spec.agent,
        "channel": "system_log",
    }


def _put_back(
    spec: TurnSpec,
    client: OpencodeClient,
    session_id: str,
    user_id: str | None,
    before: workspace.Snapshot,
) -> JsonObject:
    """Undo the turn: OpenCode's revert first, the snapshot if that fell short."""
    reverted = False
    if user_id is not None:
        try:
            client.revert(session_id, user_id)
            reverted = True
        except GatehouseError:
            reverted = False
    after_revert = workspace.take(spec.workspace)
    restored_by = "revert" if reverted else "nothing to revert"
    if after_revert.digest != before.digest:
        workspace.restore(spec.workspace, before)
        restored_by = "snapshot"
    final = workspace.take(spec.workspace)
    if final.digest != before.digest:  # pragma: no cover - restore writes exactly the snapshot
        raise GatehouseError(ErrorCode.HANDLER_FAILED, "the workspace could not be restored")
    return {
        "reverted_message": user_id,
        "restored_by": restored_by,
        "workspace_before": before.digest,
        "workspace_after": final.digest,
    }


def _diagnostics(
    client: OpencodeClient, session_id: str, watch: Watch, reason: str, idle_s: float
) -> JsonObject:
    try:
        pending: JsonValue = [
            {"id": p.get("id"), "permission": p.get("permission")}
            for p in client.permissions()
            if p.get("sessionID") == session_id
        ]
        status: JsonValue = client.statuses().get(session_id, {"type": "idle"})
    except GatehouseError as exc:
        pending, status = None, {"unknown": exc.message}
    return {
        "reason": reason,
        "idle_s": round(idle_s, 3),
        "session_status": status,
        "pending_permissions": pending,
        "last_events": list[JsonValue](watch.kept[-LAST_EVENTS:]),
    }


def _reject_leftovers(client: OpencodeClient, session_id: str, watch: Watch) -> None:
    """No ask is left pending on the server after a turn."""
    for ask in client.permissions():
        if ask.get("sessionID") == session_id and isinstance(ask.get("id"), str):
            client.reply(str(ask["id"]), "reject", "the turn is over")
            watch.activity.append(
                {
                    "kind": "permission",
                    "request_id": ask["id"],
                    "permission": ask.get("permission"),
                    "patterns": [],
                    "decision": "reject",
                    "leftover": True,
                }
            )


def run_turn(server: OpencodeServer, spec: TurnSpec) -> HandlerResult:
    client = OpencodeClient(server.url, server.password, spec.workspace)
    try:
        return _run(server, client, spec)
    finally:
        client.close()


def _run(server: OpencodeServer, client: OpencodeClient, spec: TurnSpec) -> HandlerResult:
    session_id = session_for(client, spec.run_id, spec.policy)
    before = workspace.take(spec.workspace)
    before.save(spec.snapshot_path)  # before the prompt: a crash from here on can be undone
    marker = marker_of(spec.op_key)
    body: JsonObject = {
        "agent": spec.agent,
        "model": {"providerID": PROVIDER_ID, "modelID": spec.model},
        "parts": [{"type": "text", "text": f"{marker}\n{spec.prompt}"}],
    }
    if spec.schema is not None:
        body["format"] = {"type": "json_schema", "schema": spec.schema, "retryCount": 1}
    feed = EventFeed(server.url, server.password, spec.workspace).start()
    watch = Watch(spec=spec, client=client, session_id=session_id, before=before)
    try:
        client.wait_idle(session_id)  # a prompt sent into a busy session is never run
        client.prompt_async(session_id, body)
        ended = watch_turn(client, feed, watch)
        if ended is None:
            watch.settle(feed)
            ended = child_attempt(watch)  # its event may trail the idle status
    finally:
        feed.close()
    out = _base(spec, server, session_id)
    out["marker"] = marker
    if ended is not None:  # stalled, timed out, a child session or an unanswered ask
        code, reason, idle_s = ended
        if code is ErrorCode.CHILD_SESSION_REFUSED and watch.child is not None:
            watch.activity.append({"kind": "child_session", "session_id": watch.child})
        diagnostics = _diagnostics(client, session_id, watch, reason, idle_s)
        client.abort(session_id)
        _reject_leftovers(client, session_id, watch)
        out.update(_put_back(spec, client, session_id, watch.user_id, before))
        out.update(activity=watch.activity, diagnostics=diagnostics, usage=watch.usage())
        return HandlerResult(
            ok=False,
            output=out,
            error_code=code,
            error_message=reason,
            artifacts=(_log_artifact(spec, watch.kept),),
        )
    _reject_leftovers(client, session_id, watch)
    return _finish(spec, out, before, watch.reply(), watch)


def _finish(
    spec: TurnSpec,
    out: JsonObject,
    before: workspace.Snapshot,
    reply: tuple[str, JsonValue, JsonValue],
    watch: Watch,
) -> HandlerResult:
    text, structured, error = reply
    after = workspace.take(spec.workspace)
    out.update(
        reply=cap(text),
        structured=structured,
        activity=watch.activity,
        files=list[JsonValue](workspace.changes(before, after)),
        workspace_before=before.digest,
        workspace_after=after.digest,
        usage=watch.usage(),
    )
    if error is not None or watch.error is not None:
        out["error"] = cap(error if error is not None else watch.error)
        return HandlerResult(
            ok=False,
            output=out,
            error_code=ErrorCode.HANDLER_FAILED,
            error_message=f"OpenCode reported an error: {str(out['error'])[:300]}",
            artifacts=(_log_artifact(spec, watch.kept),),
        )
    return HandlerResult(ok=True, output=out, artifacts=(_log_artifact(spec, watch.kept),))


def reconcile(server: OpencodeServer, spec: TurnSpec) -> HandlerResult | None:
    """A turn whose ledger row was claimed but never completed (a crash).

    * No snapshot on disk: the prompt was never sent (the snapshot is written
      first), so None: send it now, for the first time.
    * The session holds the turn and its finished reply: that reply is the
      result; nothing is sent again.
    * Otherwise the turn may have half-happened: abort it, revert it, put the
      snapshot back, and report ``turn_interrupted`` so the flow sends a new
      attempt under a new op_key. The model never sees this op_key twice.
    """
    before = workspace.load(spec.snapshot_path)
    if before is None:
        return None
    client = OpencodeClient(server.url, server.password, spec.workspace)
    try:
        session_id = session_for(client, spec.run_id, spec.policy)
        marker = marker_of(spec.op_key)
        user, replies = _ours(_recent_messages(client, session_id, marker), marker)
        status = client.statuses().get(session_id)
        busy = isinstance(status, dict) and status.get("type") == "busy"
        watch = Watch(spec=spec, client=client, session_id=session_id, before=before)
        out = _base(spec, server, session_id)
        out.update(marker=marker, reconciled=True)
        if user is not None and not busy and _finished(replies):
            for message in (user, *replies):
                watch.absorb(message)
            return _finish(spec, out, before, watch.reply(), watch)
        if busy:
            client.abort(session_id)
        _reject_leftovers(client, session_id, watch)
        out.update(_put_back(spec, client, session_id, _message_id(user), before))
        out["prompt_seen_by_server"] = user is not None
        return HandlerResult(
            ok=False,
            output=out,
            error_code=ErrorCode.TURN_INTERRUPTED,
            error_message="a crash cut the turn off; it was reverted and is sent again"
            " as a new attempt",
        )
    finally:
        client.close()
