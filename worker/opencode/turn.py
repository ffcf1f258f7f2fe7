"""One OpenCode turn: a prompt in the run's session, watched until it ends.

While the turn runs, every event for its session is read:

* the permission gate answers each ``permission.asked`` from the policy
  profile (``once`` or ``reject``) at once, and a reject is evidence for a
  security episode; an ask still pending past the limit fails the turn;
* the stall detector treats each event as the turn's heartbeat; no event for
  ``stall_s`` (or a session stuck ``busy`` with none), or a turn past its
  deadline, aborts the session, records diagnostics and reverts the turn;
* a ``session.created`` with a parent (a child session) aborts the turn and
  reverts it;
* tool parts, ``file.edited`` and permission events become the turn's
  activity, with file digests before and after.

A turn that did not finish cleanly leaves the workspace byte-identical to
before it (OpenCode's revert, then the snapshot if the revert fell short), and
says so with both digests. ``reconcile`` settles a turn a crash cut off.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from contracts import ErrorCode, GatehouseError, JsonObject, JsonValue, OpencodePolicy
from worker._crash import maybe_crash
from worker.handlers._base import Artifact, HandlerResult
from worker.opencode import workspace
from worker.opencode.ban import parent_of
from worker.opencode.client import OpencodeClient
from worker.opencode.config import PROVIDER_ID
from worker.opencode.events import EventFeed
from worker.opencode.supervisor import OpencodeServer

__all__ = ["TurnSpec", "marker_of", "reconcile", "run_turn", "session_for"]

_POLL_S = 0.2
_STATUS_EVERY_S = 2.0
_DRAIN_QUIET_S = 0.3  # after idle: events still arriving this close together are the turn's
_DRAIN_MAX_S = 3.0
_KEEP_EVENTS = 200  # the events kept for the system_log artifact
_LAST_EVENTS = 15  # the events shown in a stall's diagnostics
_MAX_FIELD_CHARS = 2000


@dataclass(frozen=True)
class TurnSpec:
    run_id: str
    step_id: str
    op_key: str
    workspace: Path
    snapshot_path: Path
    agent: Literal["plan", "build"]
    prompt: str
    schema: JsonObject | None  # structured output (format json_schema) when set
    policy: OpencodePolicy
    timeout_s: float
    model: str
    max_output_bytes: int
    crash_point: str | None = None


def marker_of(op_key: str) -> str:
    """The turn's tag in its prompt: the op_key, as the callee's idempotency key."""
    return f"[gatehouse turn {op_key}]"


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


def _cap(value: JsonValue) -> JsonValue:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
    if len(text) <= _MAX_FIELD_CHARS:
        return value
    return text[:_MAX_FIELD_CHARS] + f"… [{len(text) - _MAX_FIELD_CHARS} more chars]"


def _props(event: JsonObject) -> JsonObject:
    props = event.get("properties")
    return props if isinstance(props, dict) else {}


def _session_of(event: JsonObject) -> str | None:
    props = _props(event)
    sid = props.get("sessionID")
    if isinstance(sid, str):
        return sid
    part = props.get("part")
    if isinstance(part, dict) and isinstance(part.get("sessionID"), str):
        return str(part["sessionID"])
    return None


def _brief(event: JsonObject) -> JsonObject:
    """An event as the diagnostics and the system_log keep it (no deltas of text)."""
    props = _props(event)
    brief: JsonObject = {"type": event.get("type")}
    for key in ("sessionID", "file", "permission", "reply", "status"):
        if key in props:
            brief[key] = _cap(props[key])
    part = props.get("part")
    if isinstance(part, dict):
        state = part.get("state")
        brief["part"] = {
            "type": part.get("type"),
            "tool": part.get("tool"),
            "status": state.get("status") if isinstance(state, dict) else None,
        }
    return brief


@dataclass
class _Watch:
    """What one turn saw on the event stream."""

    spec: TurnSpec
    client: OpencodeClient
    session_id: str
    before: workspace.Snapshot
    activity: list[JsonValue] = field(default_factory=list)
    kept: list[JsonObject] = field(default_factory=list)
    seen_tools: set[tuple[str, str]] = field(default_factory=set)
    asked: dict[str, float] = field(default_factory=dict)  # pending ask id -> seen at
    busy_seen: bool = False
    child: str | None = None
    error: JsonValue = None
    # The turn as the events told it (OpenCode 1.18 cannot list a session's
    # messages once one of them asked for structured output, so the live path
    # never needs the listing): our prompt's id, the replies' infos, their text.
    user_id: str | None = None
    replies: dict[str, JsonObject] = field(default_factory=dict)
    texts: dict[str, tuple[str, str]] = field(default_factory=dict)  # part id -> (message, text)

    def note(self, event: JsonObject) -> None:
        if len(self.kept) < _KEEP_EVENTS and event.get("type") != "message.part.delta":
            self.kept.append(_brief(event))

    def handle(self, event: JsonObject) -> None:
        kind = event.get("type")
        props = _props(event)
        if kind == "session.status":
            status = props.get("status")
            if isinstance(status, dict) and status.get("type") == "busy":
                self.busy_seen = True
        elif kind == "permission.asked":
            self._gate(props)
        elif kind == "permission.replied":
            request = props.get("requestID")
            if isinstance(request, str):
                self.asked.pop(request, None)
        elif kind == "message.updated":
            info = props.get("info")
            if isinstance(info, dict) and info.get("role") == "assistant":
                mid = info.get("id")
                if isinstance(mid, str) and self.user_id is not None:
                    self.replies[mid] = info
        elif kind == "message.part.updated":
            self._text(props)
            self._tool(props)
        elif kind == "file.edited":
            self._file(props)
        elif kind == "session.error":
            self.error = _cap(props.get("error"))

    def _gate(self, props: JsonObject) -> None:
        request = props.get("id")
        permission = str(props.get("permission") or "")
        if not isinstance(request, str):
            return
        answer = self.spec.policy.answers.get(permission, "reject")
        patterns = props.get("patterns")
        self.asked[request] = time.monotonic()
        message = None
        if answer == "reject":
            message = f"Gatehouse policy does not allow {permission!r} here; do not retry it."
        # A reply that fails leaves the ask pending: the ask limit then fails the turn.
        with contextlib.suppress(GatehouseError):
            self.client.reply(request, answer, message)
        self.activity.append(
            {
                "kind": "permission",
                "request_id": request,
                "permission": permission,
                "patterns": _cap(patterns if isinstance(patterns, list) else []),
                "decision": answer,
            }
        )

    def _text(self, props: JsonObject) -> None:
        part = props.get("part")
        if not isinstance(part, dict) or part.get("type") != "text":
            return
        mid, pid, text = part.get("messageID"), part.get("id"), part.get("text")
        if not (isinstance(mid, str) and isinstance(pid, str) and isinstance(text, str)):
            return
        if self.user_id is None and marker_of(self.spec.op_key) in text:
            self.user_id = mid
        elif self.user_id is not None and mid != self.user_id:
            self.texts[pid] = (mid, text)

    def settle(self, feed: EventFeed) -> None:
        """Take the events still in flight after the session went idle, then read each
        reply from the server (the events may trail the idle status)."""
        now = time.monotonic()
        deadline, quiet_until = now + _DRAIN_MAX_S, now + _DRAIN_QUIET_S
        while (now := time.monotonic()) < min(deadline, quiet_until):
            event = feed.get(quiet_until - now)
            if event is not None and _session_of(event) == self.session_id:
                quiet_until = time.monotonic() + _DRAIN_QUIET_S
                self.note(event)
                self.handle(event)
        for mid in list(self.replies):
            try:
                message = self.client.message(self.session_id, mid)
            except GatehouseError:
                continue  # keep what the events said
            info, parts = message.get("info"), message.get("parts")
            if isinstance(info, dict):
                self.replies[mid] = info
            for part in parts if isinstance(parts, list) else []:
                if isinstance(part, dict):
                    self._text({"part": part})

    def reply(self) -> tuple[str, JsonValue, JsonValue]:
        """(the text the assistant wrote, its structured output, its error)."""
        order = sorted(self.replies)  # OpenCode ids ascend with time
        texts = [t for mid in order for (m, t) in self.texts.values() if m == mid and t]
        structured: JsonValue = None
        error: JsonValue = None
        for mid in order:
            info = self.replies[mid]
            if info.get("structured") is not None:
                structured = info.get("structured")
            if info.get("error") is not None:
                error = info.get("error")
        return "\n".join(texts), structured, error

    def _tool(self, props: JsonObject) -> None:
        part = props.get("part")
        if not isinstance(part, dict) or part.get("type") != "tool":
            return
        state = part.get("state")
        status = state.get("status") if isinstance(state, dict) else None
        call_id = str(part.get("callID") or "")
        if status not in ("completed", "error") or (call_id, str(status)) in self.seen_tools:
            return
        self.seen_tools.add((call_id, str(status)))
        assert isinstance(state, dict)
        tried = state.get("input")
        if part.get("tool") == "task" or (
            # a denied tool is not offered; a call to it comes back as "invalid"
            part.get("tool") == "invalid"
            and isinstance(tried, dict)
            and tried.get("tool") == "task"
        ):
            self.child = f"task tool call {call_id}"  # the tool that makes child sessions
        entry: JsonObject = {
            "kind": "tool",
            "tool": part.get("tool"),
            "call_id": call_id,
            "status": status,
            "input": _cap(state.get("input")),
        }
        if status == "error":
            entry["error"] = _cap(state.get("error"))
        self.activity.append(entry)
        maybe_crash(self.spec.crash_point, "mid_turn", self.spec.step_id)

    def _file(self, props: JsonObject) -> None:
        name = props.get("file")
        if not isinstance(name, str):
            return
        path = Path(name)
        root = self.spec.workspace.resolve()
        try:
            rel = path.resolve().relative_to(root).as_posix()
        except ValueError:
            rel = None
        after = None
        if rel is not None and path.is_file():
            after = hashlib.sha256(path.read_bytes()).hexdigest()
        before = self.before.digests.get(rel) if rel is not None else None
        self.activity.append(
            {"kind": "file", "path": rel or name, "before": before, "after": after}
        )


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


def _reply_of(replies: list[JsonObject]) -> tuple[str, JsonValue, JsonValue]:
    """(the text the assistant wrote, its structured output, its error)."""
    texts: list[str] = []
    structured: JsonValue = None
    error: JsonValue = None
    for message in replies:
        info = message.get("info")
        if isinstance(info, dict):
            if info.get("structured") is not None:
                structured = info.get("structured")
            if info.get("error") is not None:
                error = info.get("error")
        parts = message.get("parts")
        for part in parts if isinstance(parts, list) else []:
            if isinstance(part, dict) and part.get("type") == "text":
                texts.append(str(part.get("text", "")))
    return "\n".join(t for t in texts if t), structured, error


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
    client: OpencodeClient, session_id: str, watch: _Watch, reason: str, idle_s: float
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
        "last_events": list[JsonValue](watch.kept[-_LAST_EVENTS:]),
    }


def _reject_leftovers(client: OpencodeClient, session_id: str, watch: _Watch) -> None:
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
    watch = _Watch(spec=spec, client=client, session_id=session_id, before=before)
    try:
        client.prompt_async(session_id, body)
        ended = _watch(client, feed, watch)
        if ended is None:
            watch.settle(feed)
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
        out.update(activity=watch.activity, diagnostics=diagnostics)
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
    watch: _Watch,
) -> HandlerResult:
    text, structured, error = reply
    after = workspace.take(spec.workspace)
    out.update(
        reply=_cap(text),
        structured=structured,
        activity=watch.activity,
        files=list[JsonValue](workspace.changes(before, after)),
        workspace_before=before.digest,
        workspace_after=after.digest,
    )
    if error is not None or watch.error is not None:
        out["error"] = _cap(error if error is not None else watch.error)
        return HandlerResult(
            ok=False,
            output=out,
            error_code=ErrorCode.HANDLER_FAILED,
            error_message=f"OpenCode reported an error: {str(out['error'])[:300]}",
            artifacts=(_log_artifact(spec, watch.kept),),
        )
    return HandlerResult(ok=True, output=out, artifacts=(_log_artifact(spec, watch.kept),))


def _watch(
    client: OpencodeClient, feed: EventFeed, watch: _Watch
) -> tuple[ErrorCode, str, float] | None:
    """Read events until the turn ends; None when it went idle, else why it was stopped."""
    spec, policy = watch.spec, watch.spec.policy
    started = last = last_status = time.monotonic()
    while True:
        event = feed.get(_POLL_S)
        now = time.monotonic()
        if event is not None:
            child = parent_of(event)
            if child is not None:
                props = _props(event)
                info = props.get("info")
                watch.child = str(info.get("id")) if isinstance(info, dict) else "unknown"
                watch.note(event)
                return (
                    ErrorCode.CHILD_SESSION_REFUSED,
                    f"a child session ({watch.child}) appeared in the run's session; refused",
                    now - last,
                )
            if _session_of(event) == watch.session_id or event.get("type") == "file.edited":
                last = now  # the turn's heartbeat
                watch.note(event)
                watch.handle(event)
                if watch.child is not None:
                    return (
                        ErrorCode.CHILD_SESSION_REFUSED,
                        f"the model tried to start a child session ({watch.child}); refused",
                        0.0,
                    )
                if event.get("type") == "session.idle" and watch.busy_seen:
                    return None
        for request, seen in list(watch.asked.items()):
            if now - seen > policy.ask_limit_s:
                pending = {p.get("id") for p in client.permissions()}
                if request in pending:
                    return (
                        ErrorCode.PERMISSION_UNANSWERED,
                        f"permission ask {request} is still pending after"
                        f" {policy.ask_limit_s:.0f} s",
                        now - last,
                    )
                watch.asked.pop(request, None)
        if now - last_status >= _STATUS_EVERY_S and watch.busy_seen:
            last_status = now
            status = client.statuses().get(watch.session_id)
            if status is None or (isinstance(status, dict) and status.get("type") == "idle"):
                return None  # idle, and the event for it was missed
        if now - last > policy.stall_s:
            return (
                ErrorCode.OC_STALLED,
                f"no event for the session in {policy.stall_s:.0f} s (stall detector)",
                now - last,
            )
        if now - started > spec.timeout_s:
            return (
                ErrorCode.OC_STALLED,
                f"the turn ran past its {spec.timeout_s:.0f} s limit",
                now - last,
            )
        if feed.ended:
            return (
                ErrorCode.EXECUTOR_UNAVAILABLE,
                f"the OpenCode event stream ended: {feed.error or 'server gone'}",
                now - last,
            )


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
        watch = _Watch(spec=spec, client=client, session_id=session_id, before=before)
        out = _base(spec, server, session_id)
        out.update(marker=marker, reconciled=True)
        if user is not None and not busy and _finished(replies):
            return _finish(spec, out, before, _reply_of(replies), watch)
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
