"""Gatehouse contracts: every envelope's model and schema, and the error codes.

Imports nothing else of Gatehouse; every other package imports this one.
"""

from contracts._base import Closed
from contracts._errors import ErrorCode, ErrorSpec, GatehouseError
from contracts._json import JsonObject, JsonValue, canonical_json, digest_of, sha256_hex
from contracts._schemas import SCHEMA_MODELS, schema_id, schema_registry, validate_instance
from contracts.auth import Role, TokenEntry, TokenFile, TokenId
from contracts.budgets import BUDGET_KINDS, BudgetKind, Budgets, BudgetsView, BudgetUse, Price
from contracts.cancel import CancelAccepted, CancelRequest, CancelSource
from contracts.channels import (
    EPISODES_CHANNELS,
    EXPLAIN_CHANNELS,
    POLICY_CHANNELS,
    RUN_VIEW_CHANNELS,
    SECURITY_EVENTS_CHANNELS,
    TextChannel,
)
from contracts.durable import (
    APPROVAL_TOPIC,
    DURABLE_NAMES,
    EXPLAIN_WORKFLOW,
    INTENT_QUEUE,
    INTENT_WORKFLOW,
    REPLAY_WORKFLOW,
    RESOLUTION_TOPIC,
    Step,
)
from contracts.episode import DataRef, EnvelopeRef, Episode, Executor, SecurityEpisode
from contracts.explain import (
    EXPLAIN_REPORT_SCHEMA_ID,
    ExplainReport,
    ExplainStepNote,
    ExplainView,
)
from contracts.intent import IntentAccepted, IntentRequest, Mode
from contracts.job import APP_VERSION, IntentJob
from contracts.messages import MessageAccepted, MessageRequest
from contracts.notify import NotifyConfig, NotifyEvent, Sink, SmtpServer
from contracts.plan import DriverKind, InputFrom, OnError, Plan, PlanStep, Verb
from contracts.recipe import Recipe
from contracts.replay import (
    CallResolution,
    CallResolved,
    ForkAccepted,
    ForkRequest,
    ReplayDivergence,
    ReplayReport,
)
from contracts.run import (
    ApprovalRequest,
    ApprovalView,
    CallView,
    Decision,
    DecisionAccepted,
    EpisodeView,
    PlanCardView,
    RunList,
    RunStatus,
    RunSummary,
    RunView,
    StepView,
)
from contracts.run_events import RunEvent, RunEventKind
from contracts.tool_pool import (
    Approval,
    CommandRule,
    Connector,
    Destination,
    Limits,
    McpServer,
    McpTool,
    OpaPolicy,
    OpencodePolicy,
    PolicyProfile,
    ToolPool,
)
from contracts.visible import canonical, shown_input, visible

__all__ = [
    "APPROVAL_TOPIC",
    "APP_VERSION",
    "BUDGET_KINDS",
    "DURABLE_NAMES",
    "EPISODES_CHANNELS",
    "EXPLAIN_CHANNELS",
    "EXPLAIN_REPORT_SCHEMA_ID",
    "EXPLAIN_WORKFLOW",
    "INTENT_QUEUE",
    "INTENT_WORKFLOW",
    "POLICY_CHANNELS",
    "REPLAY_WORKFLOW",
    "RESOLUTION_TOPIC",
    "RUN_VIEW_CHANNELS",
    "SCHEMA_MODELS",
    "SECURITY_EVENTS_CHANNELS",
    "Approval",
    "ApprovalRequest",
    "ApprovalView",
    "BudgetKind",
    "BudgetUse",
    "Budgets",
    "BudgetsView",
    "CallResolution",
    "CallResolved",
    "CallView",
    "CancelAccepted",
    "CancelRequest",
    "CancelSource",
    "Closed",
    "CommandRule",
    "Connector",
    "DataRef",
    "Decision",
    "DecisionAccepted",
    "Destination",
    "DriverKind",
    "EnvelopeRef",
    "Episode",
    "EpisodeView",
    "ErrorCode",
    "ErrorSpec",
    "Executor",
    "ExplainReport",
    "ExplainStepNote",
    "ExplainView",
    "ForkAccepted",
    "ForkRequest",
    "GatehouseError",
    "InputFrom",
    "IntentAccepted",
    "IntentJob",
    "IntentRequest",
    "JsonObject",
    "JsonValue",
    "Limits",
    "McpServer",
    "McpTool",
    "MessageAccepted",
    "MessageRequest",
    "Mode",
    "NotifyConfig",
    "NotifyEvent",
    "OnError",
    "OpaPolicy",
    "OpencodePolicy",
    "Plan",
    "PlanCardView",
    "PlanStep",
    "PolicyProfile",
    "Price",
    "Recipe",
    "ReplayDivergence",
    "ReplayReport",
    "Role",
    "RunEvent",
    "RunEventKind",
    "RunList",
    "RunStatus",
    "RunSummary",
    "RunView",
    "SecurityEpisode",
    "Sink",
    "SmtpServer",
    "Step",
    "StepView",
    "TextChannel",
    "TokenEntry",
    "TokenFile",
    "TokenId",
    "ToolPool",
    "Verb",
    "canonical",
    "canonical_json",
    "digest_of",
    "schema_id",
    "schema_registry",
    "sha256_hex",
    "shown_input",
    "validate_instance",
    "visible",
]
