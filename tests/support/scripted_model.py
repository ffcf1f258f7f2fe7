"""The product's scripted model (``worker.scripted_model``) in the shape older tests use.

``ScriptedModel([turn, ...])`` plays the turns as a *sequence* (the last one
repeats): ``{"content": ...}``, ``{"status": int, "body": str, "headers":
{...}}``, each with an optional ``"delay_s"``. See the product module for the
full script format (conversation turns, tool calls, stalls).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from worker.scripted_model import CHAT_PATH, RecordedRequest, Script, load_script
from worker.scripted_model import ScriptedModel as _Product

__all__ = ["CHAT_PATH", "RecordedRequest", "ScriptedModel", "Turn"]

Turn = dict[str, Any]


def _sequence(turns: Sequence[Turn]) -> Script:
    if not turns:
        raise ValueError("a script needs at least one turn")
    try:
        return load_script({"replies": [dict(t) for t in turns]})
    except ValueError as exc:  # ScriptError: a typo fails the test at setup
        raise ValueError(str(exc)) from exc


class ScriptedModel(_Product):
    def __init__(self, turns: Sequence[Turn]) -> None:
        super().__init__(_sequence(turns))

    def play_turns(self, turns: Sequence[Turn]) -> None:
        """Play ``turns`` as a new sequence, from its first reply."""
        self.play(_sequence(turns))

    def __enter__(self) -> ScriptedModel:
        self.start()
        return self
