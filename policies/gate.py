"""The plan gate: deny by default, checked at compile time and before each step.

Pure decisions over a plan, a tool pool and a profile. A step passes only if
its connector is in the pool, its driver kind is the connector's and the
profile's, the connector declares limits, and its destination or command is
allowlisted. A planner may only propose: a plan that carries execution
results is refused outright. A step these checks allow is then put to the
profile's Cedar policy set, if it names one (``policies.cedar_gate``): Cedar can
only narrow, and its refusal is ``cedar_denied``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from contracts import (
    Connector,
    ErrorCode,
    GatehouseError,
    JsonObject,
    JsonValue,
    Plan,
    PlanStep,
    PolicyProfile,
    ToolPool,
)
from policies import catalog, cedar_gate
from policies.fail_closed import refusing
from policies.kinds import rules_of
from policies.read_only import step_read_only
from policies.taint import check_plan as check_taint
from policies.taint import check_step_taint, tainted

__all__ = [
    "PLAN_LEVEL",
    "RESULT_KEYS",
    "StepVerdict",
    "check_step",
    "decide_plan",
    "find_results",
    "gate_plan",
    "read_only",
]

# The step id a refusal of the whole plan is reported under (too many steps).
PLAN_LEVEL = "@plan"

# Keys that only an execution can produce. Their presence anywhere in a
# proposed step input means the planner claims to have run something.
RESULT_KEYS = frozenset(
    {
        "stdout",
        "stderr",
        "exit_code",
        "exitcode",
        "returncode",
        "tool_result",
        "tool_results",
        "tool_output",
        "execution_result",
        "status_code",
    }
)


def find_results(value: JsonValue, path: str = "") -> str | None:
    """The JSON Pointer of the first execution-result key in ``value``, if any."""
    if isinstance(value, dict):
        for key, inner in value.items():
            here = f"{path}/{key.replace('~', '~0').replace('/', '~1')}"  # RFC 6901 escaping
            if key.lower() in RESULT_KEYS:
                return here
            found = find_results(inner, here)
            if found is not None:
                return found
    elif isinstance(value, list):
        for i, inner in enumerate(value):
            found = find_results(inner, f"{path}/{i}")
            if found is not None:
                return found
    return None


def check_step(
    step: PlanStep, step_input: JsonObject | None, pool: ToolPool, profile: PolicyProfile
) -> Connector:
    """Allow one step or raise the code that refuses it.

    ``step_input`` is the resolved input; None when it comes from an earlier
    step and is not known yet (compile time), in which case the
    input-dependent checks wait for the check before execution. Cedar decides
    last, with what is known: the step, and its input once known. A check that
    raises anything but its own refusal refuses the step (``policies.fail_closed``).
    """
    with refusing(step.step_id):
        connector = _allowed(step, step_input, pool, profile)
        cedar_gate.check(step, step_input, connector, pool, profile)
    return connector


def _allowed(
    step: PlanStep, step_input: JsonObject | None, pool: ToolPool, profile: PolicyProfile
) -> Connector:
    details: JsonObject = {"step_id": step.step_id, "connector_id": step.connector_id}
    connector = pool.connector(step.connector_id)
    if connector is None:
        raise GatehouseError(
            ErrorCode.UNKNOWN_CONNECTOR,
            f"step {step.step_id!r} names connector {step.connector_id!r},"
            f" which tool pool {pool.tool_pool_id!r} does not have",
            details,
        )
    if step.driver_kind is not connector.driver_kind:
        raise GatehouseError(
            ErrorCode.DRIVER_NOT_ALLOWED,
            f"step {step.step_id!r} asks for driver {step.driver_kind.value!r} but connector"
            f" {connector.connector_id!r} is {connector.driver_kind.value!r}",
            details,
        )
    if step.driver_kind not in profile.allowed_driver_kinds:
        raise GatehouseError(
            ErrorCode.DRIVER_NOT_ALLOWED,
            f"profile {profile.profile_id!r} does not allow driver {step.driver_kind.value!r}",
            details,
        )
    if connector.limits is None:
        raise GatehouseError(
            ErrorCode.LIMITS_MISSING,
            f"connector {connector.connector_id!r} declares no limits; nothing runs unbounded",
            details,
        )
    if step.output_schema_ref is not None and catalog.output_schema(step.output_schema_ref) is None:
        raise GatehouseError(
            ErrorCode.PLAN_INVALID,
            f"step {step.step_id!r} declares output schema {step.output_schema_ref!r},"
            " which does not exist",
            details,
        )
    if step_input is None:
        return connector
    where = find_results(step_input)
    if where is not None:
        raise GatehouseError(
            ErrorCode.PLAN_CONTAINS_RESULTS,
            f"step {step.step_id!r} input carries an execution result at {where}",
            {**details, "pointer": where},
        )
    # The kind's own checks (policies/kinds): its destination or command, and everything
    # else its handler would refuse in this input, refused now: a person is never asked
    # to approve a step that cannot run.
    rules_of(step.driver_kind).check_input(step, step_input, connector, details)
    return connector


def gate_plan(plan: Plan, pool: ToolPool, profile: PolicyProfile) -> None:
    """Refuse the whole plan at the first step that is not allowed."""
    if len(plan.steps) > profile.max_steps:
        raise GatehouseError(
            ErrorCode.TOO_MANY_STEPS,
            f"the plan has {len(plan.steps)} steps; profile {profile.profile_id!r} allows"
            f" {profile.max_steps}",
            {"steps": len(plan.steps), "max_steps": profile.max_steps},
        )
    # Where outside values go first: a step shaped to take its URL or program from
    # one is refused for that, not for the part its fixed input lacks.
    check_taint(plan, profile)
    for step in plan.steps:
        check_step(step, step.input, pool, profile)


@dataclass(frozen=True)
class StepVerdict:
    """The gate's decision on one step: allowed, or the code and message refusing it."""

    step_id: str
    allowed: bool
    code: str | None = None
    message: str | None = None
    policy_ids: list[str] = field(default_factory=list)  # the Cedar policies that denied it

    @classmethod
    def refused(cls, step_id: str, exc: GatehouseError) -> StepVerdict:
        ids = exc.details.get("policy_ids")
        named = [str(i) for i in ids] if isinstance(ids, list) else []
        return cls(step_id, False, exc.code.value, exc.message, named)


def decide_plan(
    plan: Plan,
    pool: ToolPool,
    profile: PolicyProfile,
    inputs: Mapping[str, JsonObject] | None = None,
) -> list[StepVerdict]:
    """Every step's own decision, the gate not stopping at the first refusal (policy
    tests, what-if). ``inputs``: a step's resolved input, as right before it runs;
    otherwise the plan's own, as at compile time. A refusal of the whole plan (too
    many steps) comes first, under ``PLAN_LEVEL``; an outside value going where it may
    not refuses the step it would fill."""
    out: list[StepVerdict] = []
    if len(plan.steps) > profile.max_steps:
        try:
            gate_plan(plan, pool, profile)
        except GatehouseError as exc:
            out.append(StepVerdict.refused(PLAN_LEVEL, exc))
    dirty = tainted(plan)
    for step in plan.steps:
        given = (inputs or {}).get(step.step_id)
        try:
            check_step_taint(step, dirty, profile)
            check_step(step, step.input if given is None else given, pool, profile)
        except GatehouseError as exc:
            out.append(StepVerdict.refused(step.step_id, exc))
            continue
        out.append(StepVerdict(step.step_id, True))
    return out


def read_only(plan: Plan) -> bool:
    """True when no step can change anything: noop, or http GET/HEAD given inline.

    A step whose input comes from an earlier step is not known to be read-only
    when the plan is approved, so it does not count as read-only. (No connector is
    looked at: an MCP step does not count either.)
    """
    return all(step_read_only(step, step.input) for step in plan.steps)
