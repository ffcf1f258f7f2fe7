"""A new turn's step ids kept apart from the earlier ones'. Resolving ``input_from``
(an RFC 6901 JSON Pointer into an earlier step's recorded output) is
``policies.inputs.resolve_input``, re-exported here: ``gatehouse policy what-if``
resolves the same way. Pure and deterministic (it runs in the workflow body)."""

from __future__ import annotations

from contracts import JsonValue
from policies.inputs import resolve_input

__all__ = ["fresh_steps", "resolve_input"]


def fresh_steps(steps: JsonValue, taken: set[str], prefix: str) -> list[JsonValue]:
    """A new turn's steps, as the planner wrote them, with every step id that an
    earlier step already has renamed ``<prefix><id>`` (and this turn's own
    ``input_from`` references renamed with it): a new step must never meet an
    earlier step's ledger entries. Anything malformed is left for the gate."""
    if not isinstance(steps, list):
        return [steps]
    renamed: dict[str, str] = {}
    for step in steps:
        sid = step.get("step_id") if isinstance(step, dict) else None
        if isinstance(sid, str) and sid in taken:
            renamed[sid] = (prefix + sid)[:64]
    out: list[JsonValue] = []
    for step in steps:
        if not isinstance(step, dict):
            out.append(step)
            continue
        fresh = dict(step)
        sid = fresh.get("step_id")
        if isinstance(sid, str) and sid in renamed:
            fresh["step_id"] = renamed[sid]
        source = fresh.get("input_from")
        if isinstance(source, dict) and source.get("step_id") in renamed:
            fresh["input_from"] = {**source, "step_id": renamed[str(source["step_id"])]}
        out.append(fresh)
    return out
