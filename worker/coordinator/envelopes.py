"""One envelope per tool call: what a handler is given, and all it is given."""

from __future__ import annotations

from typing import Literal

from contracts import Connector, JsonObject, OpencodePolicy, sha256_hex
from contracts.execution import (
    EnvelopeContext,
    EnvelopeExtensions,
    ExecutionEnvelope,
    GatehouseEnvelopeExt,
    TurnAllowance,
)
from contracts.opa_run import OpaJob

__all__ = ["build_envelope", "envelope_id", "permissions_of"]


def envelope_id(op_key: str) -> str:
    """Derived from the op_key, so a re-executed or replayed call has the same id."""
    return "env_" + sha256_hex(f"envelope:{op_key}".encode())[:32]


def permissions_of(connector: Connector) -> list[str]:
    """The grants the tool pool gives a step that uses this connector."""
    grants = [f"connector:{connector.connector_id}", f"driver:{connector.driver_kind.value}"]
    for d in connector.destinations:
        ports = "" if d.ports is None else ":" + ",".join(str(p) for p in d.ports)
        grants.append(f"destination:{d.scheme}://{d.host}{ports}{d.path_prefix}")
    grants.extend(f"command:{c.name}" for c in connector.commands)
    if connector.mcp is not None:
        grants.extend(f"mcp_tool:{t.name}" for t in connector.mcp.tools)
    return grants


def build_envelope(
    *,
    run_id: str,
    step_id: str,
    op_key: str,
    attempt: int,
    connector: Connector,
    arguments: JsonObject,
    executor_policy: OpencodePolicy | None = None,
    narrowed: bool = False,
    allowance: TurnAllowance | None = None,
    opa: OpaJob | None = None,
    unsandboxed_shell: Literal["allowed"] | None = None,
    unsandboxed_opencode: Literal["allowed"] | None = None,
) -> ExecutionEnvelope:
    """The envelope of one attempt of one step. The gate has checked the step, so
    the connector's limits are present; the policy's timeout is the envelope's."""
    timeout_s = connector.limits.timeout_s if connector.limits is not None else 30.0
    if executor_policy is not None:  # an agent's turn (``KindRules.agent_turn``)
        turn_s = executor_policy.narrowed_timeout_s if narrowed else executor_policy.turn_timeout_s
        timeout_s = min(timeout_s, turn_s) if not narrowed else turn_s
    return ExecutionEnvelope(
        id=envelope_id(op_key),
        task_id=step_id,
        tool=connector.connector_id,
        arguments=arguments,
        context=EnvelopeContext(session_id=run_id, permissions=permissions_of(connector)),
        timeout_ms=max(1, int(timeout_s * 1000)),
        extensions=EnvelopeExtensions(
            gatehouse=GatehouseEnvelopeExt(
                op_key=op_key,
                attempt=attempt,
                driver_kind=connector.driver_kind,
                connector=connector,
                executor_policy=executor_policy,
                narrowed=narrowed,
                allowance=allowance,
                opa=opa,
                unsandboxed_shell=unsandboxed_shell,
                unsandboxed_opencode=unsandboxed_opencode,
            )
        ),
    )
