"""Resolving a step's ``input_from``: an RFC 6901 JSON Pointer into an earlier step's
recorded output. Pure and deterministic: the workflow runs it right before a step, and
``gatehouse policy what-if`` again on the outputs the ledger recorded.
"""

from __future__ import annotations

import copy
import re

from contracts import ErrorCode, GatehouseError, JsonObject, JsonValue, PlanStep
from policies.taint import position

__all__ = ["resolve_input"]


# RFC 6901 array index: "0" or no leading zero, ASCII digits only.
_INDEX = re.compile(r"0|[1-9][0-9]*", re.ASCII)


def _unescape(token: str) -> str:
    return token.replace("~1", "/").replace("~0", "~")


def _walk(doc: JsonValue, pointer: str) -> JsonValue:
    if pointer == "":
        return doc
    node = doc
    for raw in pointer.split("/")[1:]:
        token = _unescape(raw)
        if isinstance(node, dict) and token in node:
            node = node[token]
        elif isinstance(node, list) and _INDEX.fullmatch(token) and int(token) < len(node):
            node = node[int(token)]
        else:
            raise KeyError(pointer)
    return node


def resolve_input(step: PlanStep, outputs: dict[str, JsonObject]) -> JsonObject:
    source = step.input_from
    if source is None:
        if step.input is None:  # pragma: no cover - the plan contract requires one of the two
            raise GatehouseError(ErrorCode.PLAN_INVALID, f"step {step.step_id!r} has no input")
        return step.input
    if source.step_id not in outputs:
        raise GatehouseError(
            ErrorCode.INPUT_RESOLUTION_FAILED,
            f"step {step.step_id!r} takes input from {source.step_id!r}, which produced no output",
            {"step_id": step.step_id, "from": source.step_id},
        )
    try:
        value = _walk(outputs[source.step_id], source.pointer)
    except KeyError as exc:
        raise GatehouseError(
            ErrorCode.INPUT_RESOLUTION_FAILED,
            f"pointer {source.pointer!r} is not in the output of {source.step_id!r}",
            {"step_id": step.step_id, "from": source.step_id, "pointer": source.pointer},
        ) from exc
    if source.into is not None and step.input is not None:
        return _place(step, step.input, value)
    if not isinstance(value, dict):
        raise GatehouseError(
            ErrorCode.INPUT_RESOLUTION_FAILED,
            f"pointer {source.pointer!r} of {source.step_id!r} is not a JSON object",
            {"step_id": step.step_id, "from": source.step_id, "pointer": source.pointer},
        )
    return value


def _place(step: PlanStep, fixed: JsonObject, value: JsonValue) -> JsonObject:
    """The step's fixed input with ``value`` at its ``into`` position (a new key, or
    the end of a list); the fixed input itself is left as it was approved."""
    at = position(step)
    *parents, last = [_unescape(t) for t in at.split("/")[1:]]
    whole = copy.deepcopy(fixed)
    node: JsonValue = whole
    for token in parents:  # position() found each of them in the fixed input
        if isinstance(node, dict):
            node = node[token]
        elif isinstance(node, list):
            node = node[int(token)]
    if isinstance(node, list):
        node.append(value)
    elif isinstance(node, dict):
        node[last] = value
    return whole
