"""Follow-up messages to an interactive OPA run (``POST /runs/{id}/messages``).

Each message is the next turn of the run's session: the planner plans it, the
gate checks it, a person approves it, then it runs. ``end`` closes the session
instead: the run ends and its output archive holds every turn.
"""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict, model_validator

from contracts._base import Closed, Identifier, ShortText

__all__ = ["MessageAccepted", "MessageRequest"]


class MessageRequest(Closed):
    # The served contract says what the validator below enforces: text (end absent or
    # false), or end: true (no text).
    model_config = ConfigDict(
        json_schema_extra={
            "oneOf": [
                {
                    "required": ["text"],
                    "properties": {"text": {"type": "string"}, "end": {"const": False}},
                },
                {
                    "required": ["end"],
                    "properties": {"end": {"const": True}, "text": {"type": "null"}},
                },
            ]
        }
    )
    schema_id: Literal["env.run_message_v1"] = "env.run_message_v1"
    text: ShortText | None = None
    end: bool = False  # close the session: no more turns
    sent_by: Identifier = "anonymous"

    @model_validator(mode="after")
    def _text_or_end(self) -> MessageRequest:
        if (self.text is None) != self.end:
            raise ValueError("a message has text, or ends the session with end: true (not both)")
        return self


class MessageAccepted(Closed):
    run_id: str
    turn: int  # 1 for the first follow-up
    end: bool
    sent_by: str
    sent_at: str
    links: dict[str, str]
