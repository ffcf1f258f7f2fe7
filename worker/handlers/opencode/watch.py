"""Watching one OpenCode turn on its event stream.

``Watch`` keeps what a turn did as its events arrive: the permission gate's
answers, tool calls, file edits with their digests, a child-session attempt,
and the turn's own prompt and replies. ``watch_turn`` reads the stream until
the session goes idle or the turn must be stopped (stall, deadline, child
session, an ask left pending, the run cancelled, the run's budgets spent),
and says which.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from contracts import ErrorCode, GatehouseError, JsonObject, JsonValue, OpencodePolicy
from contracts.execution import TurnAllowance
from worker.handlers import nobody
from worker.handlers.opencode import workspace
from worker.handlers.opencode.ban import parent_of
from worker.handlers.opencode.client import OpencodeClient
from worker.handlers.opencode.events import EventFeed
from worker.handlers.opencode.spend import overspent, usage_of
from worker.runtime import maybe_crash

__all__ = ["LAST_EVENTS", "TurnSpec", "Watch", "cap", "child_attempt", "marker_of", "watch_turn"]

_POLL_S = 0.2
_STATUS_EVERY_S = 2.0
_DRAIN_QUIET_S = 0.3  # after idle: events still arriving this close together are the turn's
_DRAIN_MAX_S = 3.0
_KEEP_EVENTS = 200  # the events kept for the system_log artifact
LAST_EVENTS = 15  # the events shown in a stall's diagnostics
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
    allowance: TurnAllowance | None = None  # a build turn stops at what the run has left
    # Who cancelled the run, asked while the turn runs (``HandlerContext.cancelled_by``;
    # None: nobody, or it cannot be asked), so a cancel stops a turn in flight instead
    # of waiting for the step boundary after it. Nobody, unless the caller can ask.
    cancelled_by: Callable[[str], str | None] = field(default=nobody, compare=False)


def marker_of(op_key: str) -> str:
    """The turn's tag in its prompt: the op_key, as the callee's idempotency key."""
    return f"[gatehouse turn {op_key}]"


def cap(value: JsonValue) -> JsonValue:
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
            brief[key] = cap(props[key])
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
class Watch:
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
            self.error = cap(props.get("error"))

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
                "patterns": cap(patterns if isinstance(patterns, list) else []),
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
            if event is not None and (
                _session_of(event) == self.session_id or event.get("type") == "file.edited"
            ):  # file.edited names no session, and may trail the idle status too
                quiet_until = time.monotonic() + _DRAIN_QUIET_S
                self.note(event)
                self.handle(event)
        for mid in list(self.replies):
            try:
                self.absorb(self.client.message(self.session_id, mid))
            except GatehouseError:
                continue  # keep what the events said

    def absorb(self, message: JsonObject) -> None:
        """A message as the server lists it (``{"info", "parts"}``), into the turn."""
        info, parts = message.get("info"), message.get("parts")
        for part in parts if isinstance(parts, list) else []:
            if isinstance(part, dict):
                self._text({"part": part})
        if isinstance(info, dict) and info.get("role") == "assistant":
            mid = info.get("id")
            if isinstance(mid, str) and self.user_id is not None:
                self.replies[mid] = info

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

    def usage(self) -> JsonObject:
        """What the turn has spent so far, as its replies report it."""
        return usage_of(self.replies, self.spec.model)

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
            "input": cap(state.get("input")),
        }
        if status == "error":
            entry["error"] = cap(state.get("error"))
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


def child_attempt(watch: Watch) -> tuple[ErrorCode, str, float] | None:
    """The turn's end when the model tried to start a child session (None: it did not)."""
    if watch.child is None:
        return None
    reason = f"the model tried to start a child session ({watch.child}); refused"
    return ErrorCode.CHILD_SESSION_REFUSED, reason, 0.0


def watch_turn(
    client: OpencodeClient, feed: EventFeed, watch: Watch
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
                if (attempt := child_attempt(watch)) is not None:
                    return attempt
                if event.get("type") == "session.idle" and watch.busy_seen:
                    return None
        spent = overspent(spec.allowance, watch.usage(), now - started)
        if spent is not None:
            return ErrorCode.BUDGET_EXCEEDED, f"{spent}; the turn was cut short", now - last
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
            if (by := spec.cancelled_by(spec.run_id)) is not None:
                return (
                    ErrorCode.RUN_CANCELLED,
                    f"the run was cancelled by {by} while the turn ran",
                    now - last,
                )
            status = client.statuses().get(watch.session_id)
            if status is None or (isinstance(status, dict) and status.get("type") == "idle"):
                return None  # idle, and the event for it was missed
        if now - last > policy.stall_s:
            quiet = f"no event for the session in {policy.stall_s:.0f} s (stall detector)"
            if not watch.busy_seen:  # told apart in the record: it calls for another remedy
                quiet += "; OpenCode took the prompt but never started the turn"
            return ErrorCode.OC_STALLED, quiet, now - last
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
