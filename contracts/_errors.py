"""The closed set of Gatehouse error codes.

Exception tree::

    Exception
     └── GatehouseError          carries one ErrorCode, a message and JSON details
          (every foreign exception is translated into this once, at the
           boundary where it enters: ``raise GatehouseError(...) from exc``)

Each code carries its HTTP status and whether retrying the same request can
succeed. Codes are stable identifiers: never renamed, renumbered or reused.
docs/api.md lists them all; a test keeps the two in step.
"""

from __future__ import annotations

from enum import Enum
from typing import NamedTuple

from contracts._json import JsonObject

__all__ = ["ErrorCode", "ErrorSpec", "GatehouseError"]


class ErrorSpec(NamedTuple):
    number: int
    http_status: int
    retryable: bool
    summary: str


_SPECS: dict[str, ErrorSpec] = {}


def _code(wire: str, number: int, http_status: int, retryable: bool, summary: str) -> str:
    """One code's whole spec, kept by its wire identifier (the member's value)."""
    _SPECS[wire] = ErrorSpec(number, http_status, retryable, summary)
    return wire


class ErrorCode(Enum):
    """Stable error codes, one line each: wire identifier, number, HTTP status,
    retryable, summary. The value is the wire identifier."""

    # fmt: off

    # ingress: the request itself is wrong (nothing is written)
    INVALID_JSON = _code("invalid_json", 1001, 400, False, "The body is not valid JSON.")
    INVALID_REQUEST = _code("invalid_request", 1002, 422, False, "The body or a parameter does not match its schema.")
    UNSUPPORTED_MEDIA_TYPE = _code("unsupported_media_type", 1003, 415, False, "The body must be application/json (POST /intent also takes an OPA archive).")
    PAYLOAD_TOO_LARGE = _code("payload_too_large", 1004, 413, False, "The body exceeds the size limit.")
    UNKNOWN_RECIPE = _code("unknown_recipe", 1005, 422, False, "No recipe has that id.")
    UNKNOWN_PROFILE = _code("unknown_profile", 1006, 422, False, "No policy profile has that id.")
    UNKNOWN_TOOL_POOL = _code("unknown_tool_pool", 1007, 422, False, "No tool pool has that id.")
    IDEMPOTENCY_CONFLICT = _code("idempotency_conflict", 1008, 409, False, "The Idempotency-Key was already used with a different body.")
    NOT_FOUND = _code("not_found", 1009, 404, False, "No such route.")
    METHOD_NOT_ALLOWED = _code("method_not_allowed", 1010, 405, False, "The route does not take that method.")
    UNAUTHORIZED = _code("unauthorized", 1011, 401, False, "No valid bearer token was presented.")
    FORBIDDEN = _code("forbidden", 1012, 403, False, "The token's identity lacks the role this needs, or speaks for another.")
    BUDGET_WIDENED = _code("budget_widened", 1013, 422, False, "The intent asks for a budget above its policy profile's limit.")
    BODY_TIMEOUT = _code("body_timeout", 1014, 408, True, "The body did not arrive in time (fewer bytes than Content-Length said).")
    JSON_TOO_DEEP = _code("json_too_deep", 1015, 400, False, "The body's JSON nests arrays and objects deeper than 64 levels.")
    TOKEN_EXPIRED = _code("token_expired", 1016, 401, False, "The bearer token expired, or was rotated and its grace period ended.")
    TOKEN_REVOKED = _code("token_revoked", 1017, 401, False, "The bearer token was revoked.")
    RATE_LIMITED = _code("rate_limited", 1018, 429, True, "Too many requests from this address or identity; wait Retry-After s.")
    HEADERS_TOO_LARGE = _code("headers_too_large", 1019, 431, False, "Too many request headers, or one or all of them too long.")
    OVERLOADED = _code("overloaded", 1020, 503, True, "The queue holds as many runs as the deployment allows (GATEHOUSE_MAX_QUEUED); the intent was not stored; send it again after Retry-After s.")
    QUEUE_SHARE_EXCEEDED = _code("queue_share_exceeded", 1021, 429, True, "This submitter already has as many runs queued as one may (GATEHOUSE_MAX_QUEUED_PER_SUBMITTER); the intent was not stored; retry later.")
    SLACK_SIGNATURE_INVALID = _code("slack_signature_invalid", 1022, 401, False, "A request to the Slack route is not signed with the Slack app's signing secret.")
    SLACK_REQUEST_STALE = _code("slack_request_stale", 1023, 401, False, "A request to the Slack route is timestamped more than five minutes from now.")
    SLACK_REQUEST_REPLAYED = _code("slack_request_replayed", 1024, 409, False, "A signed Slack request arrived a second time.")
    SLACK_USER_UNKNOWN = _code("slack_user_unknown", 1025, 403, False, "The Slack user is mapped to no Gatehouse identity that holds the role the action needs.")
    OIDC_STATE_INVALID = _code("oidc_state_invalid", 1026, 400, False, "A sign-in came back with a state this browser did not start, or one already used or expired.")
    OIDC_TOKEN_INVALID = _code("oidc_token_invalid", 1027, 401, False, "The identity provider's answer did not hold a valid ID token (signature, algorithm, issuer, audience, expiry or nonce).")
    OIDC_UNAVAILABLE = _code("oidc_unavailable", 1028, 503, True, "The identity provider could not be reached or answered badly; sign in again later.")
    OIDC_TOKEN_REPLAYED = _code("oidc_token_replayed", 1029, 409, False, "The ID token was already exchanged for a session; each one opens one session, once: sign in again.")
    IDENTITY_RESERVED = _code("identity_reserved", 1030, 403, False, "The identity is a name Gatehouse records as its own actor (policy:, system:, dbos, …); no token, sign-in or Slack mapping may take it.")
    # plan gate: the plan is refused (at compile time or again before a step runs)
    PLAN_INVALID = _code("plan_invalid", 2001, 422, False, "The plan does not match its schema.")
    PLAN_CONTAINS_RESULTS = _code("plan_contains_results", 2002, 422, False, "The plan carries execution results; a planner may only propose.")
    UNKNOWN_CONNECTOR = _code("unknown_connector", 2003, 422, False, "A step names a connector that is not in the tool pool.")
    DRIVER_NOT_ALLOWED = _code("driver_not_allowed", 2004, 422, False, "A step's driver kind is unknown or differs from its connector's.")
    COMMAND_NOT_ALLOWED = _code("command_not_allowed", 2005, 422, False, "A shell step's command or arguments are not allowlisted.")
    DESTINATION_NOT_ALLOWED = _code("destination_not_allowed", 2006, 422, False, "An http step's destination is not allowlisted.")
    LIMITS_MISSING = _code("limits_missing", 2007, 422, False, "A connector used by the plan declares no limits.")
    TOO_MANY_STEPS = _code("too_many_steps", 2008, 422, False, "The plan has more steps than the profile allows.")
    PLAN_TAMPERED = _code("plan_tampered", 2009, 409, False, "The stored plan no longer matches the digest that was approved.")
    REPAIR_REFUSED = _code("repair_refused", 2012, 422, False, "A repaired plan changes steps that already ran, reuses their ids, or changes nothing.")
    TAINTED_INPUT = _code("tainted_input", 2013, 422, False, "A value from outside the approved plan (an earlier step's output) would fill a position the profile does not mark as data: a destination, a program or its flags, or an instruction to an agent.")
    CEDAR_DENIED = _code("cedar_denied", 2014, 422, False, "The profile's Cedar policy set refused a step the rest of the gate allowed; the message names the denying policies (@id), or says that none permits it.")
    CEDAR_POLICY_INVALID = _code("cedar_policy_invalid", 2015, 422, False, "A Cedar policy set does not parse, or names an entity type, action, attribute or entity that the schema generated from the tool pools does not have.")
    # approval
    RUN_NOT_FOUND = _code("run_not_found", 3001, 404, False, "No run has that id.")
    STALE_PLAN_DIGEST = _code("stale_plan_digest", 3002, 409, False, "The decision names a plan digest that is not the run's plan.")
    ALREADY_DECIDED = _code("already_decided", 3003, 409, False, "This plan digest already has a different decision.")
    RUN_NOT_AWAITING_APPROVAL = _code("run_not_awaiting_approval", 3004, 409, False, "The run has finished or never waits for approval.")
    APPROVAL_TIMEOUT = _code("approval_timeout", 3005, 408, False, "No decision arrived before the approval deadline.")
    ARTIFACT_NOT_FOUND = _code("artifact_not_found", 3006, 404, False, "No artifact has that digest.")
    FOUR_EYES = _code("four_eyes", 3007, 403, False, "The identity that submitted a run may not decide on its plan.")
    CALL_NOT_FOUND = _code("call_not_found", 3008, 404, False, "No ledger entry has that op_key.")
    CALL_NOT_IN_DOUBT = _code("call_not_in_doubt", 3009, 409, False, "The call is not waiting for an operator, or was resolved otherwise.")
    RUN_NOT_FINISHED = _code("run_not_finished", 3010, 409, False, "Replay, fork and explain need a run that has finished.")
    FORK_STEP_INVALID = _code("fork_step_invalid", 3011, 422, False, "The parent run has no such step, or never reached it.")
    RUN_CANCELLED = _code("run_cancelled", 3012, 409, False, "The run was cancelled.")
    RUN_ALREADY_FINISHED = _code("run_already_finished", 3013, 409, False, "The run has already finished; there is nothing to cancel.")
    RUN_NOT_AWAITING_INPUT = _code("run_not_awaiting_input", 3014, 409, False, "The run takes no follow-up message: it is not an interactive OPA run, or it has ended.")
    PERMISSION_DENIED = _code("permission_denied", 2010, 403, False, "The policy profile refused an executor's permission ask; the tool did not run.")
    CHILD_SESSION_REFUSED = _code("child_session_refused", 2011, 403, False, "An executor session with a parent (a child session) was refused.")
    # execution
    PLANNER_FAILED = _code("planner_failed", 4001, 502, True, "The planner answered with an error or an invalid plan.")
    PLANNER_UNAVAILABLE = _code("planner_unavailable", 4002, 503, True, "The recipe needs a model planner and none is configured.")
    HANDLER_FAILED = _code("handler_failed", 4003, 502, False, "A step's handler reported failure.")
    HANDLER_TIMEOUT = _code("handler_timeout", 4004, 504, True, "A step's handler ran past its timeout.")
    INPUT_RESOLUTION_FAILED = _code("input_resolution_failed", 4005, 422, False, "A step's input_from did not resolve to an object.")
    CALL_IN_DOUBT = _code("call_in_doubt", 4006, 409, False, "A call to a callee without idempotency keys was interrupted; an operator must decide.")
    OUTPUT_INVALID = _code("output_invalid", 4007, 502, False, "A step's output does not match the schema the plan declared for it.")
    UPSTREAM_UNAVAILABLE = _code("upstream_unavailable", 4008, 503, True, "The callee refused the connection or answered 429/503: the call did not take effect.")
    OC_STALLED = _code("oc_stalled", 4009, 504, True, "An OpenCode turn went quiet or ran out of time; it was aborted and reverted.")
    OC_TIMEOUT = _code("oc_timeout", 4010, 504, False, "An OpenCode step timed out and the timeout ladder (revert, shrink scope) did not recover it; the workspace was restored.")
    PERMISSION_UNANSWERED = _code("permission_unanswered", 4011, 504, False, "An executor's permission ask could not be answered within its limit.")
    TURN_INTERRUPTED = _code("turn_interrupted", 4012, 503, True, "A worker crash cut an OpenCode turn off; its effects were reverted and it is sent again as a new attempt.")
    EXECUTOR_UNAVAILABLE = _code("executor_unavailable", 4013, 503, True, "The OpenCode server could not be started or reached.")
    EXECUTOR_PANIC = _code("executor_panic", 4014, 502, False, "A step's handler raised instead of answering; the coordinator recovered and recorded it as an error result.")
    PROTOCOL_VIOLATION = _code("protocol_violation", 4015, 502, False, "A handler answered with something that is not a valid result for its envelope; the run ends (a hard failure).")
    EXPLAIN_UNAVAILABLE = _code("explain_unavailable", 4016, 503, True, "Explain needs a model and none is configured, or it could not be reached.")
    EXPLAIN_INVALID = _code("explain_invalid", 4017, 502, True, "The model's explain report is not JSON matching the report schema; asking again asks anew.")
    BUDGET_EXCEEDED = _code("budget_exceeded", 4018, 429, False, "The run spent one of its budgets (steps, model turns, tokens, cost, wall time); it was stopped, and the budget is named.")
    SANDBOX_UNAVAILABLE = _code("sandbox_unavailable", 4019, 503, False, "A shell step or an OpenCode turn needs a sandbox and this worker cannot set one up (no bubblewrap, or it cannot create namespaces: see gatehouse doctor); it was not run bare.")
    MCP_TOOL_CHANGED = _code("mcp_tool_changed", 4020, 502, False, "An MCP server's live definition of a tool (name, description, input schema) differs from the pin in the tool pool; the call was not sent.")
    MCP_TOOL_NOT_ALLOWED = _code("mcp_tool_not_allowed", 4021, 422, False, "An mcp_proxy step names a tool its connector does not allow (or has not pinned).")

    # OPA archives: refused before anything is stored or extracted
    OPA_NOT_ZIP = _code("opa_not_zip", 1101, 415, False, "The upload is not a ZIP archive (no end of central directory record).")
    OPA_ZIP_CORRUPT = _code("opa_zip_corrupt", 1102, 422, False, "The archive's ZIP structure is damaged, ambiguous or unsupported: local headers disagree with the central directory, a CRC or size does not match, junk around the directory, ZIP64, split archives, or a compression method other than stored or deflated.")
    OPA_PATH_UNSAFE = _code("opa_path_unsafe", 1103, 422, False, "An entry's path is unsafe (.. or . components, absolute, backslash, drive letter or colon, NUL or control characters, empty components), or an entry is a symbolic link or special file, or would land outside the extraction root; the whole archive is refused.")
    OPA_DUPLICATE_ENTRY = _code("opa_duplicate_entry", 1104, 422, False, "Two entries have the same name, also after case folding and Unicode normalisation, or a file sits where another entry needs a folder.")
    OPA_LIMIT_EXCEEDED = _code("opa_limit_exceeded", 1105, 413, False, "The archive exceeds a limit: its size, entry count, an entry's or the total uncompressed size, a name's length, the folder depth or the manifest's size.")
    OPA_ZIP_BOMB = _code("opa_zip_bomb", 1106, 413, False, "The archive looks like a zip bomb: a compression ratio past the limit, or entries that overlap (share compressed data).")
    OPA_ENCRYPTED = _code("opa_encrypted", 1107, 422, False, "An entry is encrypted; encrypted archives are refused.")
    OPA_MANIFEST_INVALID = _code("opa_manifest_invalid", 1108, 422, False, "META-INF/MANIFEST.MF is missing or not a valid JAR manifest (72-byte lines, continuations, Name: Value headers), or a required or known attribute is missing or wrong.")
    OPA_VERSION_UNSUPPORTED = _code("opa_version_unsupported", 1109, 422, False, "The manifest's OPA-Version is not one Gatehouse reads.")
    OPA_PROMPT_INVALID = _code("opa_prompt_invalid", 1110, 422, False, "The prompt file the manifest names is missing, is a folder, or is not UTF-8 text.")
    OPA_HISTORY_INVALID = _code("opa_history_invalid", 1111, 422, False, "The session history is not JSON matching the OPA history schema.")
    OPA_SIGNATURE_INVALID = _code("opa_signature_invalid", 1112, 422, False, "The archive's signature does not verify: a digest in the .SF or the manifest does not match, the PKCS#7 block is malformed or does not verify, or signature files are missing or extra.")
    OPA_SIGNATURE_WEAK = _code("opa_signature_weak", 1113, 422, False, "The signature uses a digest Gatehouse refuses (MD5, SHA-1); SHA-256 or stronger is required.")
    OPA_SIGNER_UNTRUSTED = _code("opa_signer_untrusted", 1114, 422, False, "The signer's certificate is not in the trust store nor issued by a CA in it, or it (or its issuer) is expired or not yet valid.")
    OPA_UNSIGNED_FILE = _code("opa_unsigned_file", 1115, 422, False, "A signed archive holds a file the manifest's digests do not cover (added after signing).")
    OPA_UNSIGNED_REFUSED = _code("opa_unsigned_refused", 1116, 403, False, "An unsigned archive may not run in autonomous mode unless the policy profile allows it.")
    OPA_CONTEXT_TOO_LONG = _code("opa_context_too_long", 1117, 422, False, "The archive's context (system messages, history, prompt) makes an objective longer than an intent's limit of 2000 characters.")
    OPA_RECIPE_NOT_ALLOWED = _code("opa_recipe_not_allowed", 1119, 403, False, "The policy profile does not let archives run under the recipe asked for, or names no recipe for archives at all (its opa section).")
    OPA_OUTPUT_UNAVAILABLE = _code("opa_output_unavailable", 1120, 409, False, "The run has no output archive: it was not submitted as an OPA archive, or its output has not been packed yet (the details say which).")
    # infrastructure
    DATABASE_UNAVAILABLE = _code("database_unavailable", 5001, 503, True, "The database cannot be reached; retry later.")
    CORRUPT_RECORD = _code("corrupt_record", 5002, 500, False, "A stored record failed validation when read back.")
    NO_WORKER = _code("no_worker", 5004, 503, True, "No worker took the job in time; check that a worker is running.")
    CONFIG_INVALID = _code("config_invalid", 5005, 500, False, "dbos-config.yaml or the notifications file cannot be read, is not YAML, or has a wrong value.")
    INTERNAL_ERROR = _code("internal_error", 5003, 500, True, "An unexpected error; see the logs.")
    STORAGE_FULL = _code("storage_full", 5006, 507, True, "The disk holding the database, the workspaces or the evidence files is full; nothing was stored; send it again after Retry-After s, once space is freed.")
    SHIM_UNAVAILABLE = _code("shim_unavailable", 5008, 503, True, "The shim is starting or stopping and serves no request now; send it again in a moment.")
    WORKFLOW_LOST = _code("workflow_lost", 5007, 500, False, "The run's durable workflow ended in an error, or has no record, while the run had not finished; the reaper ended the run failed and recorded the cause as a security event.")
    # fmt: on

    @property
    def spec(self) -> ErrorSpec:
        return _SPECS[self.value]

    @property
    def http_status(self) -> int:
        return self.spec.http_status

    @property
    def retryable(self) -> bool:
        return self.spec.retryable


class GatehouseError(Exception):
    """The one exception type that crosses Gatehouse's own boundaries."""

    def __init__(self, code: ErrorCode, message: str, details: JsonObject | None = None) -> None:
        super().__init__(f"{code.value}: {message}")
        self.code = code
        self.message = message
        self.details: JsonObject = details if details is not None else {}

    def to_json(self) -> JsonObject:
        return {
            "code": self.code.value,
            "message": self.message,
            "retryable": self.code.retryable,
            "details": self.details,
        }
