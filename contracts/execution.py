"""The executor boundary of the Reach protocol: one envelope in, one result out.

The coordinator (``worker/coordinator/``) builds an ``ExecutionEnvelope`` for
every tool call of a plan step and hands it to the step's handler; the
handler answers with an ``ExecutionResult``. Both are schema-validated at the
boundary, the envelope is what the ledger records as the call's request (its
digest is the request digest), and the result is recorded with the response.

The Reach fields are exactly as the protocol names them. What Gatehouse needs
besides them (the op_key the callee de-duplicates on, the attempt, the
connector the policy resolved, the executor policy of an OpenCode step)
lives in one extension object, ``extensions.gatehouse``, so a Reach reader
can ignore it.

* ``status``: ``success`` (the tool did what was asked), ``failure`` (the tool
  ran and reported failure: a soft failure, the step's ``on_error`` decides),
  ``error`` (the executor could not act: a refusal, a timeout, a panic).
* ``error.code`` is one of Gatehouse's stable codes (``contracts._errors``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, PrivateAttr, SerializerFunctionWrapHandler, model_serializer

from contracts._base import Closed
from contracts._json import JsonObject
from contracts.budgets import Price
from contracts.opa_run import OpaJob
from contracts.plan import DriverKind
from contracts.tool_pool import Connector, OpencodePolicy

__all__ = [
    "EnvelopeContext",
    "ExecutionEnvelope",
    "ExecutionResult",
    "GatehouseEnvelopeExt",
    "GatehouseResultExt",
    "ResultArtifact",
    "ResultError",
    "ResultMetrics",
    "ResultStatus",
    "TurnAllowance",
]

ResultStatus = Literal["success", "failure", "error"]


class EnvelopeContext(Closed):
    session_id: str = Field(min_length=1, max_length=128)  # the run: sessions share nothing
    # What the policy granted this step, e.g. "connector:inventory",
    # "destination:http://127.0.0.1:9000/", "command:sha256sum".
    permissions: list[str] = Field(default_factory=list, max_length=512)


class TurnAllowance(Closed):
    """What is left of the run's budgets when an OpenCode turn starts.

    The run's account is counted from recorded calls only, so the allowance is
    the same on a recovered run and a replay. The turn is cut short (aborted,
    reverted, its workspace restored) once it spends past any of these; None
    is no limit.
    """

    tokens: int | None = Field(default=None, ge=0)
    cost_usd: float | None = Field(default=None, ge=0)
    wall_s: float | None = Field(default=None, ge=0)
    prices: dict[str, Price] = Field(default_factory=dict, max_length=256)  # the profile's


class GatehouseEnvelopeExt(Closed):
    op_key: str = Field(pattern=r"^[0-9a-f]{64}$")  # sent to callees as the idempotency key
    attempt: int = Field(ge=1)
    driver_kind: DriverKind
    connector: Connector  # as the tool pool defines it; its limits are present
    # opencode steps only: the profile's executor policy, and whether this turn is
    # the timeout ladder's narrowed re-prompt.
    executor_policy: OpencodePolicy | None = None
    narrowed: bool = False
    allowance: TurnAllowance | None = None  # opencode steps only
    opa: OpaJob | None = None  # the run came from an OPA archive (see contracts.opa_run)
    # restricted_shell: "allowed" when the profile lets shell steps run without a
    # sandbox on a worker that has none. Left out of the envelope when not set, so
    # the envelopes (and request digests) of runs recorded before it are unchanged.
    unsandboxed_shell: Literal["allowed"] | None = None
    # opencode: the same for the OpenCode server's sandbox, left out the same way.
    unsandboxed_opencode: Literal["allowed"] | None = None

    @model_serializer(mode="wrap")
    def _omit_unset(self, handler: SerializerFunctionWrapHandler) -> JsonObject:
        data: JsonObject = handler(self)
        for name in ("unsandboxed_shell", "unsandboxed_opencode"):
            if data.get(name) is None:
                data.pop(name, None)
        return data


class EnvelopeExtensions(Closed):
    gatehouse: GatehouseEnvelopeExt


class ExecutionEnvelope(Closed):
    """One tool call, as a handler sees it: nothing of the run beyond this."""

    id: str = Field(pattern=r"^env_[0-9a-f]{32}$")  # derived from the op_key: replays match
    task_id: str = Field(min_length=1, max_length=64)  # the plan step
    tool: str = Field(min_length=1, max_length=64)  # the connector id
    arguments: JsonObject  # the step's input after input_from resolution
    context: EnvelopeContext
    timeout_ms: int = Field(gt=0)
    extensions: EnvelopeExtensions

    # The run's own directory on this worker. Not part of the envelope's JSON
    # (and so not of its digest): it is where *this* machine keeps the session.
    _workspace: Path | None = PrivateAttr(default=None)

    @property
    def gatehouse(self) -> GatehouseEnvelopeExt:
        return self.extensions.gatehouse

    @property
    def workspace(self) -> Path:
        if self._workspace is None:
            raise RuntimeError("the envelope was not bound to a workspace")
        return self._workspace

    def bound(self, workspace: Path) -> ExecutionEnvelope:
        """This envelope, delivered into the run's workspace."""
        copy = self.model_copy()
        copy._workspace = workspace
        return copy


class ResultError(Closed):
    code: str = Field(pattern=r"^[a-z][a-z0-9_]{0,63}$")
    message: str = Field(max_length=4000)


class ResultMetrics(Closed):
    duration_ms: int = Field(ge=0)


class ResultArtifact(Closed):
    """What a handler produced besides its output; the ledger stores it by digest."""

    name: str = Field(min_length=1, max_length=128)
    media_type: str = Field(min_length=1, max_length=128)
    content_b64: str | None = None  # as the handler returns it
    sha256: str | None = Field(default=None, pattern=r"^[0-9a-f]{64}$")  # as recorded
    size_bytes: int | None = Field(default=None, ge=0)


class GatehouseResultExt(Closed):
    artifacts: list[ResultArtifact] = Field(default_factory=list, max_length=64)


class ResultExtensions(Closed):
    gatehouse: GatehouseResultExt = Field(default_factory=GatehouseResultExt)


class ExecutionResult(Closed):
    envelope_id: str = Field(pattern=r"^env_[0-9a-f]{32}$")
    status: ResultStatus
    output: JsonObject
    error: ResultError | None = None
    metrics: ResultMetrics
    extensions: ResultExtensions = Field(default_factory=ResultExtensions)
