"""The timeout ladder of an opencode step, and the outcomes of settled in-doubt calls.

Pure bookkeeping for the flow's attempt loop (``worker/flow/_settle.py``): no I/O.
"""

from __future__ import annotations

from contracts import ErrorCode, JsonObject, JsonValue, PolicyProfile

__all__ = ["Ladder", "applied", "not_resent"]


def applied(op_key: str) -> JsonObject:
    """A step whose in-doubt call an operator says did take effect: done, output unknown."""
    return {
        "ok": True,
        "op_key": op_key,
        "output": {"resolution": "applied", "op_key": op_key},
        "error_code": None,
        "error_message": None,
        "artifacts": [],
    }


class Ladder:
    """The timeout ladder of one opencode step: revert → shrink scope → oc_timeout.

    Every turn it set aside (stalled, or undone after a crash) is kept with
    its output, so the step's evidence shows each rung.
    """

    def __init__(self, profile: PolicyProfile) -> None:
        self.shrink = profile.opencode.shrink_scope == "first_subgoal"
        self.turns: list[JsonValue] = []

    def note(self, outcome: JsonObject) -> None:
        self.turns.append(
            {
                "op_key": outcome.get("op_key"),
                "attempt": outcome.get("attempt"),
                "error_code": outcome.get("error_code"),
                "error_message": outcome.get("error_message"),
                "output": outcome.get("output"),
            }
        )

    def climb(self, outcome: JsonObject, *, narrowed: bool) -> bool:
        """Record a stalled turn; True when the narrowed re-prompt is still to come."""
        self.note(outcome)
        return self.shrink and not narrowed

    def attach(self, outcome: JsonObject) -> JsonObject:
        if not self.turns:
            return outcome
        output = outcome.get("output")
        merged: JsonObject = dict(output) if isinstance(output, dict) else {}
        merged["ladder"] = list(self.turns)
        return {**outcome, "output": merged}

    def give_up(self, last: JsonObject) -> JsonObject:
        """Rung 3: the step fails with oc_timeout; the workspace is as before the step."""
        output = last.get("output")
        before = output.get("workspace_before") if isinstance(output, dict) else None
        after = output.get("workspace_after") if isinstance(output, dict) else None
        rungs = "revert, shrink scope" if self.shrink else "revert"
        return {
            "ok": False,
            "op_key": last.get("op_key"),
            "output": {
                "ladder": list(self.turns),
                "workspace_before": before,
                "workspace_after": after,
            },
            "error_code": ErrorCode.OC_TIMEOUT.value,
            "error_message": f"the opencode step timed out; the ladder ({rungs}) did not"
            " recover it and the workspace was restored",
            "artifacts": last.get("artifacts", []),
        }


def not_resent(op_key: str) -> JsonObject:
    """An in-doubt call found not applied after the run was cancelled: not sent again."""
    return {
        "ok": False,
        "op_key": op_key,
        "output": {"resolution": "not_applied", "op_key": op_key},
        "error_code": ErrorCode.RUN_CANCELLED.value,
        "error_message": "the run was cancelled while the call was in doubt; not sent again",
        "artifacts": [],
    }
