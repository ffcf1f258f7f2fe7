"""The script file a scripted model plays back, and how a request picks its reply.

A script is JSON, one of two shapes:

* ``{"replies": [Reply, ...]}`` — a *sequence*: the n-th chat request gets the
  n-th reply, and the last one repeats. Good for a planner that asks once.
* ``{"turns": [{"match": "...", "replies": [Reply, ...]}, ...]}`` — a
  *conversation*: the request's last user message picks the first turn whose
  ``match`` it contains (a turn without ``match`` matches anything), and the
  number of assistant messages after that user message picks the reply. An
  agent that calls a tool, reads the result and answers again walks down the
  replies of one turn. Stateless, so a restarted client gets the same answers.

A Reply is one of

* ``{"content": str | JSON}`` — assistant text (a JSON value is dumped);
* ``{"tool_calls": [{"name": "write", "arguments": {...}}, ...]}`` — tool calls
  (optionally with ``content`` too);
* ``{"status": int, "body": str, "headers": {...}}`` — that HTTP answer, verbatim;

and any reply may add ``"delay_s": float`` (wait before answering),
``"stall": true`` (stream the first piece, then send nothing more until the
client hangs up: a model that stops streaming mid-turn) or ``"usage":
{"prompt_tokens": int, "completion_tokens": int}`` (the usage to report
instead of the word count: budgets can be driven exactly).
"""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import Field, ValidationError, model_validator

from contracts import Closed, JsonObject, JsonValue

__all__ = [
    "EXHAUSTED",
    "Reply",
    "Script",
    "ScriptError",
    "ScriptedTurn",
    "ScriptedUsage",
    "ToolCallSpec",
    "load_script",
    "pick_reply",
]

# What a conversation gets when its turn has no more replies: plain text, so an
# agent loop ends instead of asking again forever.
EXHAUSTED = "[scripted model: no more replies scripted for this turn]"


class ScriptError(ValueError):
    """A script that cannot be played: bad JSON, unknown keys, an empty turn."""


class ToolCallSpec(Closed):
    name: str = Field(min_length=1)
    arguments: JsonObject = Field(default_factory=dict)


class ScriptedUsage(Closed):
    prompt_tokens: int = Field(ge=0)
    completion_tokens: int = Field(ge=0)


class Reply(Closed):
    content: JsonValue = None
    tool_calls: list[ToolCallSpec] = Field(default_factory=list)
    status: int | None = Field(default=None, ge=100, le=599)
    body: str = ""
    headers: dict[str, str] = Field(default_factory=dict)
    delay_s: float = Field(default=0.0, ge=0.0)
    stall: bool = False
    usage: ScriptedUsage | None = None

    @model_validator(mode="after")
    def _one_kind(self) -> Reply:
        answers = self.content is not None or bool(self.tool_calls)
        if self.status is not None and answers:
            raise ValueError("a reply gives content/tool_calls or status/body, not both")
        if self.status is None and not answers and not self.stall:
            raise ValueError("a reply needs content, tool_calls, status or stall")
        if self.status is None and (self.body or self.headers):
            raise ValueError("body and headers go with status")
        return self

    @property
    def text(self) -> str:
        """The assistant text ('' for none); a JSON value is dumped compactly."""
        if self.content is None:
            return ""
        if isinstance(self.content, str):
            return self.content
        return json.dumps(self.content, separators=(",", ":"))


class ScriptedTurn(Closed):
    match: str | None = None
    replies: list[Reply] = Field(min_length=1)


class Script(Closed):
    replies: list[Reply] | None = Field(default=None, min_length=1)
    turns: list[ScriptedTurn] | None = Field(default=None, min_length=1)

    @model_validator(mode="after")
    def _one_shape(self) -> Script:
        if (self.replies is None) == (self.turns is None):
            raise ValueError("a script has either 'replies' (a sequence) or 'turns', not both")
        return self


def load_script(source: Path | JsonValue) -> Script:
    """A script from a file path or an already parsed JSON value; ScriptError if bad."""
    try:
        raw: JsonValue = (
            json.loads(source.read_text("utf-8")) if isinstance(source, Path) else source
        )
        return Script.model_validate(raw)
    except (OSError, ValueError, ValidationError) as exc:
        raise ScriptError(f"bad model script: {exc}") from exc


def _text_of(message: JsonObject) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # [{"type": "text", "text": ...}, ...]
        return "\n".join(
            str(part.get("text", ""))
            for part in content
            if isinstance(part, dict) and isinstance(part.get("text"), str)
        )
    return ""


def pick_reply(script: Script, serial: int, body: JsonValue) -> Reply:
    """The reply for the ``serial``-th chat request (0-based) with this body."""
    if script.replies is not None:
        return script.replies[min(serial, len(script.replies) - 1)]
    assert script.turns is not None
    messages = body.get("messages") if isinstance(body, dict) else None
    chat = [m for m in messages if isinstance(m, dict)] if isinstance(messages, list) else []
    last_user = max((i for i, m in enumerate(chat) if m.get("role") == "user"), default=-1)
    prompt = _text_of(chat[last_user]) if last_user >= 0 else ""
    answered = sum(1 for m in chat[last_user + 1 :] if m.get("role") == "assistant")
    for turn in script.turns:
        if turn.match is None or turn.match in prompt:
            if answered < len(turn.replies):
                return turn.replies[answered]
            return Reply(content=EXHAUSTED)
    return Reply(content=EXHAUSTED)
