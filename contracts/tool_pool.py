"""Tool pools (``ds.gatehouse_tool_pool_v1``) and policy profiles.

A tool pool is the allowlist menu a plan may choose from: connectors keyed by
id, each bound to one driver kind, with its destinations or commands and the
limits every call runs under. Anything a pool does not name is refused.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import (
    Field,
    SerializationInfo,
    SerializerFunctionWrapHandler,
    StringConstraints,
    model_serializer,
    model_validator,
)

from contracts._base import Closed, Identifier, ShortText
from contracts._json import JsonObject, digest_of
from contracts.budgets import DEFAULT_BUDGETS, Budgets, Price
from contracts.plan import KIND_SHAPES, DriverKind, kinds_that

__all__ = [
    "Approval",
    "CedarRules",
    "CommandRule",
    "Connector",
    "Destination",
    "Limits",
    "McpServer",
    "McpTool",
    "OpaPolicy",
    "OpencodePolicy",
    "PolicyProfile",
    "ToolPool",
]

Host = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9.:\-\[\]]{1,253}$")]
AbsPath = Annotated[str, StringConstraints(pattern=r"^/[A-Za-z0-9._/+-]{1,255}$")]
CommandName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9._+-]{1,64}$")]


class Limits(Closed):
    timeout_s: float = Field(gt=0, le=3600)
    max_output_bytes: int = Field(gt=0, le=64 * 1024 * 1024)


class Destination(Closed):
    """One allowlisted HTTP destination: exact scheme and host, optional ports."""

    scheme: Literal["http", "https"]
    host: Host
    ports: list[int] | None = None  # None: any port
    path_prefix: str = "/"
    # Loopback and private addresses are refused unless the entry says otherwise
    # (the demo and tests talk to fixtures on 127.0.0.1).
    allow_private: bool = False


class CommandRule(Closed):
    """One allowlisted program. It runs by absolute path, never through a shell."""

    name: CommandName
    path: AbsPath
    # Every argument must match this pattern in full; flags must also be listed.
    arg_pattern: str = r"^[A-Za-z0-9._,=:@+/-]{1,256}$"
    allowed_flags: list[str] = Field(default_factory=list)
    max_args: int = Field(default=16, ge=0, le=256)


McpToolName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9._/-]{1,128}$")]
McpArg = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9._,=:@+/-]{1,256}$")]


def mcp_tool_digest(name: str, description: str, input_schema: JsonObject) -> str:
    """The pin of one MCP tool: SHA-256 of its canonical name, description and input schema."""
    return digest_of({"name": name, "description": description, "input_schema": input_schema})


class McpTool(Closed):
    """One allowed MCP tool, pinned: its definition as fetched when the pool was pinned.

    The description and schema are kept (not only their digest) so the gate can
    hold a step's arguments to the schema, and an approver can read what the
    tool claims to do, without asking the server.
    """

    name: McpToolName
    description: str = Field(max_length=8000)
    input_schema: JsonObject
    digest: str = Field(pattern=r"^[0-9a-f]{64}$")

    @model_validator(mode="after")
    def _digest_matches(self) -> McpTool:
        if self.digest != mcp_tool_digest(self.name, self.description, self.input_schema):
            raise ValueError(f"tool {self.name!r}: digest is not the pin of its definition")
        return self


class McpServer(Closed):
    """The MCP server of an ``mcp_proxy`` connector and the tools allowed on it.

    ``stdio``: ``command`` (an absolute path) started with exactly ``args``, in the
    worker's sandbox when it has one; ``read_only_paths`` are the extra folders it may
    read there (its interpreter, its code). ``streamable_http``: ``url``, which must
    match the connector's ``destinations`` (the http handler's rules).
    """

    transport: Literal["stdio", "streamable_http"]
    command: AbsPath | None = None
    args: list[McpArg] = Field(default_factory=list, max_length=32)
    read_only_paths: list[AbsPath] = Field(default_factory=list, max_length=16)
    url: str | None = Field(default=None, max_length=2048)
    # The allowed tools, pinned (``python -m worker.mcp_pin`` writes them); none: no call.
    tools: list[McpTool] = Field(default_factory=list, max_length=200)
    # Tools that change nothing: an interrupted call to one may be sent again.
    read_only_tools: list[McpToolName] = Field(default_factory=list)

    @model_validator(mode="after")
    def _shape(self) -> McpServer:
        if self.transport == "stdio" and (self.command is None or self.url is not None):
            raise ValueError("a stdio MCP server takes a command and no url")
        if self.transport == "streamable_http" and (
            self.url is None or self.command is not None or self.args or self.read_only_paths
        ):
            raise ValueError("a streamable_http MCP server takes a url and no command")
        names = [t.name for t in self.tools]
        if len(set(names)) != len(names):
            raise ValueError("a tool is pinned twice")
        unknown = sorted(set(self.read_only_tools) - set(names))
        if unknown:
            raise ValueError(f"read_only_tools names tools that are not allowed: {unknown}")
        return self

    def tool(self, name: str) -> McpTool | None:
        for t in self.tools:
            if t.name == name:
                return t
        return None

    @property
    def identity(self) -> str:
        """The server as the ledger and evidence name it."""
        if self.url is not None:
            return self.url
        return " ".join([self.command or "", *self.args])


class Connector(Closed):
    connector_id: Identifier
    driver_kind: DriverKind
    description: ShortText
    limits: Limits | None = None
    destinations: list[Destination] = Field(default_factory=list)
    commands: list[CommandRule] = Field(default_factory=list)
    # "key": the callee de-duplicates on the Idempotency-Key header (the op_key),
    # so an interrupted call may be sent again. "none": it does not; no key is
    # sent, and an interrupted call is in doubt until an operator resolves it.
    idempotency: Literal["key", "none"] = "key"
    # mcp_proxy connectors only: the server and its pinned tools.
    mcp: McpServer | None = None

    @model_validator(mode="after")
    def _fits_driver(self) -> Connector:
        shape = KIND_SHAPES[self.driver_kind]
        if self.destinations and not shape.destinations:
            raise ValueError(f"only {kinds_that('destinations')} connectors take destinations")
        if (self.mcp is not None) != shape.mcp:
            raise ValueError(f"an {kinds_that('mcp')} connector, and only one, takes an mcp server")
        if self.mcp is not None and self.mcp.transport == "stdio" and self.destinations:
            raise ValueError("a stdio MCP server takes no destinations")
        if self.commands and not shape.commands:
            raise ValueError(f"only {kinds_that('commands')} connectors take commands")
        if self.idempotency == "none" and not shape.chooses_idempotency:
            raise ValueError(
                f"only {kinds_that('chooses_idempotency')} connectors choose their idempotency"
            )
        return self


class ToolPool(Closed):
    schema_id: Literal["ds.gatehouse_tool_pool_v1"] = "ds.gatehouse_tool_pool_v1"
    tool_pool_id: Identifier
    version: str
    description: ShortText
    connectors: list[Connector]

    def connector(self, connector_id: str) -> Connector | None:
        for c in self.connectors:
            if c.connector_id == connector_id:
                return c
        return None


class Approval(Closed):
    # "always": a person decides every plan. "auto_read_only": a plan whose every
    # step only reads (noop, or http GET/HEAD) is approved by the policy itself,
    # recorded as decided by "policy:<profile_id>"; any other plan waits for a person.
    mode: Literal["always", "auto_read_only"] = "always"
    # Four-eyes: the identity that submitted a run may not approve or reject it.
    four_eyes: bool = True
    timeout_s: float = Field(default=86400, gt=0)
    # How long one durable wait lasts before the workflow re-reads plan_approvals,
    # in case a decision's wake-up message was lost (the row is the authority).
    recheck_s: float = Field(default=300, gt=0)
    # A plan still waiting this long is announced again, to the notifications
    # file's escalation_sinks (event approval_escalated). None: never.
    escalate_after_s: float | None = Field(default=None, gt=0)
    # A plan still waiting is announced again every this many seconds, to the sinks
    # that asked for approval_reminder: the n-th reminder n times this long after the
    # wait began (a notifier that was away sends the latest one only). None: never.
    remind_every_s: float | None = Field(default=None, gt=0)
    # A plan still waiting this long before its timeout_s ends the wait (and denies
    # it) is announced once more, to the sinks that asked for approval_expiring. None:
    # never.
    warn_before_expiry_s: float | None = Field(default=None, gt=0)
    # How many distinct approvers a plan needs (none of them its submitter under
    # four_eyes), and how many a plan that can change anything needs (None: quorum).
    # One rejection denies the plan whatever the quorum.
    quorum: int = Field(default=1, ge=1, le=10)
    quorum_for_changes: int | None = Field(default=None, ge=1, le=10)
    # A step that takes outside data (input_from an earlier step whose output came
    # from the network, a program or an agent) waits, once that value exists, for a
    # decision on a new revision of the plan with the value written in: the approver
    # sees the exact request before it is sent. False: the value is re-checked only.
    reapprove_outside_data: bool = False


# Every OpenCode permission class. The server config sets each one explicitly
# (an implicit "ask" nobody answers hangs a session forever).
PERMISSION_CLASSES: tuple[str, ...] = (
    "read", "edit", "glob", "grep", "list", "bash", "task", "external_directory",
    "todowrite", "question", "webfetch", "websearch", "lsp", "doom_loop", "skill",
)  # fmt: skip
PermissionAction = Literal["allow", "deny", "ask"]
PermissionAnswer = Literal["once", "reject"]


def _default_permissions() -> dict[str, PermissionAction]:
    rules: dict[str, PermissionAction] = dict.fromkeys(PERMISSION_CLASSES, "deny")
    rules.update(read="allow", glob="allow", grep="allow", list="allow", lsp="allow")
    rules.update(todowrite="allow", edit="ask", bash="ask")
    return rules


def _default_answers() -> dict[str, PermissionAnswer]:
    return {"edit": "once"}


class OpencodePolicy(Closed):
    """How Gatehouse drives OpenCode for runs under a profile.

    ``permissions`` is OpenCode's own rule per permission class: ``allow`` and
    ``deny`` are settled inside OpenCode; every ``ask`` reaches Gatehouse's
    permission gate, which answers it from ``answers`` (a class not listed there
    is rejected). ``task`` (child sessions) is always denied.
    """

    permissions: dict[str, PermissionAction] = Field(default_factory=_default_permissions)
    answers: dict[str, PermissionAnswer] = Field(default_factory=_default_answers)
    # Stall detector: a turn with no event for its session this long is aborted.
    stall_s: float = Field(default=30.0, gt=0, le=3600)
    # The most one turn may take, events or not.
    turn_timeout_s: float = Field(default=300.0, gt=0, le=7200)
    # A permission ask still pending this long after it was seen fails the step.
    ask_limit_s: float = Field(default=10.0, gt=0, le=600)
    # Timeout ladder rung 2: re-prompt once with the step narrowed to its first
    # sub-goal (its own turn timeout), or go straight to oc_timeout ("none").
    shrink_scope: Literal["first_subgoal", "none"] = "first_subgoal"
    narrowed_timeout_s: float = Field(default=120.0, gt=0, le=7200)

    @model_validator(mode="after")
    def _explicit(self) -> OpencodePolicy:
        missing = sorted(set(PERMISSION_CLASSES) - set(self.permissions))
        unknown = sorted(set(self.permissions) - set(PERMISSION_CLASSES))
        if missing or unknown:
            raise ValueError(
                f"permissions must name every class: missing {missing}, unknown {unknown}"
            )
        if self.permissions["task"] != "deny":
            raise ValueError("permission 'task' (child sessions) must be 'deny'")
        return self


class OpaPolicy(Closed):
    """How runs submitted as OPA archives may run under a profile.

    The default refuses archives: no recipe is allowed until a profile names
    some. An archive's ``Agent-Hint`` picks a recipe only if it is in
    ``recipes``; a recipe asked for by the submitter must be too.
    """

    recipes: list[Identifier] = Field(default_factory=list, max_length=50)
    # The recipe when neither the archive's hint nor the submitter names one.
    default_recipe: Identifier | None = None
    # Unsigned archives do not run in autonomous mode unless this says so.
    allow_unsigned_autonomous: bool = False
    # What an autonomous run may spend at most (the OPA spec recommends 50 turns and
    # 200,000 tokens); the profile's own budgets still apply where they are narrower.
    autonomous_max_turns: int = Field(default=50, ge=1, le=100_000)
    autonomous_max_tokens: int = Field(default=200_000, ge=1, le=10_000_000_000)

    @model_validator(mode="after")
    def _default_is_allowed(self) -> OpaPolicy:
        if self.default_recipe is not None and self.default_recipe not in self.recipes:
            raise ValueError(f"default_recipe {self.default_recipe!r} is not in recipes")
        return self


TaintPosition = Annotated[str, StringConstraints(pattern=r"^(/[^\x00/]*)*$", max_length=256)]


class CedarRules(Closed):
    """The Cedar policy set a profile names, as the gate applies it to one run.

    Never written in a profile file: the catalog fills it in from
    ``policies/cedar/<policy_set_id>.cedar`` (a replay, from the version the run
    ran under), and the run's submitter is bound to it when the run is known."""

    policy_set_id: Identifier
    digest: str = Field(pattern=r"^[0-9a-f]{64}$")  # SHA-256 of the .cedar file's bytes
    text: str = Field(min_length=1, max_length=1_000_000)
    # The principal of every request: who submitted the run (None: not known here).
    submitted_by: str | None = Field(default=None, max_length=256)
    # Who approved the plan the step belongs to (the decision that let it run; the
    # one that completed a quorum): ``context.approver`` at run time (None: before).
    approved_by: str | None = Field(default=None, max_length=256)


class PolicyProfile(Closed):
    schema_id: Literal["ds.gatehouse_policy_profile_v1"] = "ds.gatehouse_policy_profile_v1"
    profile_id: Identifier
    version: str
    description: ShortText
    max_steps: int = Field(ge=1, le=200)
    allowed_driver_kinds: list[DriverKind]
    approval: Approval = Approval()
    # Guardrail text given to model planners (channel model_instruction): never
    # shown to people as human_ui, never mixed with tool output.
    planner_instruction: str = Field(min_length=1, max_length=8000)
    # Budget for model planners: the most tokens one compile may ask a model for.
    max_planner_tokens: int = Field(default=4096, ge=1, le=200_000)
    # A step whose call certainly did not take effect (upstream_unavailable) is
    # sent again as a new attempt, with a new op_key, up to this many attempts,
    # after a backoff of retry_backoff_s * 2^(attempt-1) with seeded jitter.
    max_attempts: int = Field(default=3, ge=1, le=10)
    retry_backoff_s: float = Field(default=0.5, ge=0, le=60)
    opencode: OpencodePolicy = Field(default_factory=OpencodePolicy)
    # What one run may spend (contracts/budgets.py says what counts); an intent
    # may narrow these, never widen them.
    budgets: Budgets = DEFAULT_BUDGETS
    # US dollars per million tokens, by the model name the provider reports;
    # max_cost_usd prices tokens with it.
    prices: dict[str, Price] = Field(default_factory=dict)
    # Runs from OPA archives: which recipes, and whether unsigned ones run autonomously.
    opa: OpaPolicy = Field(default_factory=OpaPolicy)
    # restricted_shell steps run in a kernel sandbox (worker/sandbox); on a worker
    # that cannot make one they are refused (sandbox_unavailable) unless this says
    # "allowed", in so many words.
    unsandboxed_shell: Literal["refused", "allowed"] = "refused"
    # Where a value from outside the approved plan (an earlier step's output, via
    # input_from) may go, per driver kind: JSON Pointers into the step's input, "*"
    # matching any one key or index. policies/taint.py keeps the positions that
    # are never data (a URL, a program, a flag, an agent's prompt) whatever this says.
    tainted_data: dict[DriverKind, list[TaintPosition]] = Field(
        default_factory=lambda: {
            kind: list(shape.default_data)
            for kind, shape in KIND_SHAPES.items()
            if shape.default_data
        }
    )
    # opencode steps (and the opencode planner) drive an OpenCode server that runs in
    # a kernel sandbox (worker/sandbox/server.py); on a worker that cannot make one
    # they are refused (sandbox_unavailable) unless this says "allowed".
    unsandboxed_opencode: Literal["refused", "allowed"] = "refused"
    # A Cedar policy set (policies/cedar/<id>.cedar) that decides every step too,
    # after the checks above allowed it: it can only narrow (policies/cedar.py).
    cedar: Identifier | None = None
    # That policy set's text and digest, filled in by the catalog (never by the file).
    cedar_rules: CedarRules | None = None

    @model_serializer(mode="wrap")
    def _without_unset_cedar(
        self, handler: SerializerFunctionWrapHandler, info: SerializationInfo
    ) -> object:
        # A profile without Cedar dumps exactly as before these fields existed: its
        # dump is part of recorded planner requests, which a replay compares by digest.
        out = handler(self)
        if isinstance(out, dict):
            for key in ("cedar", "cedar_rules"):
                if out.get(key) is None:
                    out.pop(key, None)
        return out
