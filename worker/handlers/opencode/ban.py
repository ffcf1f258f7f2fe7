"""The child-session ban: the one module allowed to name a parent session id.

OpenCode makes a child session when its ``task`` tool runs a subagent; a child
runs outside the step that Gatehouse approved and gated, so none may exist.
The ban has two halves:

* ``refuse_parent`` — Gatehouse itself never asks for a child: a session
  request that carries a parent id is refused before it is sent;
* ``parent_of`` — a ``session.created`` event for a session with a parent id
  (something made a child anyway) is a sighting: the turn aborts and a
  security episode is written.

``mise run policy:no-parentid`` keeps every other module free of parent ids.
"""

from __future__ import annotations

from contracts import ErrorCode, GatehouseError, JsonObject, JsonValue

__all__ = ["parent_of", "refuse_parent"]

_PARENT_KEYS = ("parentID", "parentId", "parent_id")


def refuse_parent(body: JsonObject) -> JsonObject:
    """The session-create body, unchanged; refused if it names a parent session."""
    for key in _PARENT_KEYS:
        if body.get(key) is not None:
            raise GatehouseError(
                ErrorCode.CHILD_SESSION_REFUSED,
                "Gatehouse never creates a child session (a session with a parent)",
                {"parent": str(body.get(key))[:80]},
            )
    return body


def parent_of(event: JsonObject) -> str | None:
    """The parent id of a ``session.created`` event's session, if it has one."""
    if event.get("type") != "session.created":
        return None
    props = event.get("properties")
    info: JsonValue = props.get("info") if isinstance(props, dict) else None
    if not isinstance(info, dict):
        return None
    for key in _PARENT_KEYS:
        value = info.get(key)
        if isinstance(value, str) and value:
            return value
    return None
