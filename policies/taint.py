"""Taint: where a value from outside the approved plan may go.

An approver approves the plan's own values. A step that takes ``input_from`` an
earlier step gets a value nobody approved: an HTTP body, shell output, what an
agent wrote, or something derived from them (a step fed by a tainted step is
tainted in turn). Such a value may fill only a position the profile marks as
data (``tainted_data``), and never one its kind holds fixed (``never_data`` in
``policies/kinds``), whatever the profile says: it cannot choose where a request
goes, which program runs or with which flags, or what an agent is told to do.
Which kinds' output is outside data is the kinds' to say too (``outside_data``).

Pure and deterministic: the gate calls it on the plan before approval, and the
workflow again on the resolved input right before the step runs.
"""

from __future__ import annotations

import re

from contracts import (
    ErrorCode,
    GatehouseError,
    JsonObject,
    JsonValue,
    Plan,
    PlanStep,
    PolicyProfile,
)
from policies.fail_closed import refusing
from policies.kinds import rules_of

__all__ = [
    "check_plan",
    "check_resolved",
    "check_step_taint",
    "outside_data",
    "position",
    "tainted",
]

# RFC 6901 array index: "0" or no leading zero, ASCII digits only. ``str.isdigit``
# also takes superscript two (which ``int`` refuses) and other scripts' digits
# (which ``int`` reads as numbers), so the pointer would name another place.
_INDEX = re.compile(r"0|[1-9][0-9]*", re.ASCII)


def _index(token: str, node: list[JsonValue]) -> bool:
    """``token`` is an index into ``node``."""
    return _INDEX.fullmatch(token) is not None and int(token) < len(node)


def _tokens(pointer: str) -> list[str]:
    if pointer == "":
        return []
    return [t.replace("~1", "/").replace("~0", "~") for t in pointer.split("/")[1:]]


def _covers(pattern: list[str], path: list[str]) -> bool:
    """``pattern`` (with ``*`` for any one token) is ``path`` or one of its parents."""
    if len(pattern) > len(path):
        return False
    return all(p in ("*", t) for p, t in zip(pattern, path, strict=False))


def tainted(plan: Plan) -> set[str]:
    """The ids of the steps whose output is outside data."""
    out: set[str] = set()
    for step in plan.steps:
        fed = step.input_from is not None and step.input_from.step_id in out
        if rules_of(step.driver_kind).outside_data or fed:
            out.add(step.step_id)
    return out


def outside_data(step: PlanStep, plan: Plan) -> bool:
    """The step takes a value from outside the approved plan."""
    return step.input_from is not None and step.input_from.step_id in tainted(plan)


def _refuse(step: PlanStep, message: str, at: str) -> GatehouseError:
    source = step.input_from.step_id if step.input_from is not None else None
    return GatehouseError(
        ErrorCode.TAINTED_INPUT,
        f"step {step.step_id!r}: {message}",
        {"step_id": step.step_id, "from": source, "position": at},
    )


def position(step: PlanStep) -> str:
    """The JSON Pointer, in the step's input, that its ``input_from`` value fills;
    ``/argv/-`` is spelled with the index it will take. Raises ``plan_invalid``
    when ``into`` names no place in the fixed input."""
    source = step.input_from
    if source is None or source.into is None:
        return ""
    *parents, last = _tokens(source.into)
    node: JsonValue = step.input
    for token in parents:
        if isinstance(node, dict) and token in node:
            node = node[token]
        elif isinstance(node, list) and _index(token, node):
            node = node[int(token)]
        else:
            node = None
            break
    parent = "".join("/" + t.replace("~", "~0").replace("/", "~1") for t in parents)
    if isinstance(node, list) and last == "-":
        return f"{parent}/{len(node)}"
    if isinstance(node, dict) and last not in node:
        return source.into
    raise GatehouseError(
        ErrorCode.PLAN_INVALID,
        f"step {step.step_id!r}: input_from.into {source.into!r} must name a new key of an"
        " object in its input, or the end of a list (/-)",
        {"step_id": step.step_id, "into": source.into},
    )


def _check_position(step: PlanStep, at: str, profile: PolicyProfile) -> None:
    path = _tokens(at)
    for never in rules_of(step.driver_kind).never_data:
        fixed = _tokens(never)
        if _covers(fixed, path) or _covers(path, fixed):
            raise _refuse(
                step,
                f"a value from outside the plan may not fill {at or 'the whole input'!r}"
                f" of a {step.driver_kind.value} step (it holds {never or 'everything'!r})",
                at,
            )
    allowed = profile.tainted_data.get(step.driver_kind, [])
    if not any(_covers(_tokens(data), path) for data in allowed):
        raise _refuse(
            step,
            f"profile {profile.profile_id!r} does not mark {at or 'the whole input'!r} of a"
            f" {step.driver_kind.value} step as data; a value from outside the plan may not"
            " fill it",
            at,
        )


def check_plan(plan: Plan, profile: PolicyProfile) -> None:
    """Refuse the plan at the first step an outside value would fill wrongly."""
    dirty = tainted(plan)
    for step in plan.steps:
        check_step_taint(step, dirty, profile)


def check_step_taint(step: PlanStep, dirty: set[str], profile: PolicyProfile) -> None:
    """Refuse the step if an outside value would fill it wrongly (``dirty``: the plan's
    ``tainted`` steps)."""
    if step.input_from is not None and step.input_from.step_id in dirty:
        with refusing(step.step_id):
            _check_position(step, position(step), profile)


def check_resolved(
    step: PlanStep, plan: Plan, profile: PolicyProfile, step_input: JsonObject
) -> None:
    """Right before the step runs: the static check again, and the value itself (an
    outside value that would be a command-line flag is refused)."""
    with refusing(step.step_id):
        _check_resolved(step, plan, profile, step_input)


def _check_resolved(
    step: PlanStep, plan: Plan, profile: PolicyProfile, step_input: JsonObject
) -> None:
    if not outside_data(step, plan):
        return
    at = position(step)
    _check_position(step, at, profile)
    value: JsonValue = step_input
    for token in _tokens(at):
        if isinstance(value, dict):
            value = value.get(token)
        elif isinstance(value, list) and _index(token, value):
            value = value[int(token)]
        else:
            value = None
    problem = rules_of(step.driver_kind).outside_value_problem(value)
    if problem is not None:
        raise _refuse(step, problem, at)
