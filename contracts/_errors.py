"""The closed set of Gatehouse error codes.

Exception tree::

    Exception
     └── GatehouseError          carries one ErrorCode, a message and JSON details
          (every foreign exception is translated into this once, at the
           boundary where it enters: ``raise GatehouseError(...) from exc``)

Each code carries its HTTP status and whether retrying the same request can
succeed. Codes are stable identifiers: never renamed, renumbered or reused.
README.md lists them all; a test keeps the two in step.
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


class ErrorCode(Enum):
    """Stable error codes. The value is the wire identifier."""

    # ingress: the request itself is wrong (nothing is written)
    INVALID_JSON = "invalid_json"
    INVALID_REQUEST = "invalid_request"
    UNSUPPORTED_MEDIA_TYPE = "unsupported_media_type"
    PAYLOAD_TOO_LARGE = "payload_too_large"
    UNKNOWN_RECIPE = "unknown_recipe"
    UNKNOWN_PROFILE = "unknown_profile"
    UNKNOWN_TOOL_POOL = "unknown_tool_pool"
    IDEMPOTENCY_CONFLICT = "idempotency_conflict"
    NOT_FOUND = "not_found"
    METHOD_NOT_ALLOWED = "method_not_allowed"
    UNAUTHORIZED = "unauthorized"
    FORBIDDEN = "forbidden"
    BUDGET_WIDENED = "budget_widened"
    BODY_TIMEOUT = "body_timeout"
    JSON_TOO_DEEP = "json_too_deep"
    TOKEN_EXPIRED = "token_expired"  # noqa: S105  (an error code, not a password)
    TOKEN_REVOKED = "token_revoked"  # noqa: S105  (an error code, not a password)
    RATE_LIMITED = "rate_limited"
    HEADERS_TOO_LARGE = "headers_too_large"
    OVERLOADED = "overloaded"
    QUEUE_SHARE_EXCEEDED = "queue_share_exceeded"
    # plan gate: the plan is refused (at compile time or again before a step runs)
    PLAN_INVALID = "plan_invalid"
    PLAN_CONTAINS_RESULTS = "plan_contains_results"
    UNKNOWN_CONNECTOR = "unknown_connector"
    DRIVER_NOT_ALLOWED = "driver_not_allowed"
    COMMAND_NOT_ALLOWED = "command_not_allowed"
    DESTINATION_NOT_ALLOWED = "destination_not_allowed"
    LIMITS_MISSING = "limits_missing"
    TOO_MANY_STEPS = "too_many_steps"
    PLAN_TAMPERED = "plan_tampered"
    REPAIR_REFUSED = "repair_refused"
    TAINTED_INPUT = "tainted_input"
    # approval
    RUN_NOT_FOUND = "run_not_found"
    STALE_PLAN_DIGEST = "stale_plan_digest"
    ALREADY_DECIDED = "already_decided"
    RUN_NOT_AWAITING_APPROVAL = "run_not_awaiting_approval"
    APPROVAL_TIMEOUT = "approval_timeout"
    ARTIFACT_NOT_FOUND = "artifact_not_found"
    FOUR_EYES = "four_eyes"
    CALL_NOT_FOUND = "call_not_found"
    CALL_NOT_IN_DOUBT = "call_not_in_doubt"
    RUN_NOT_FINISHED = "run_not_finished"
    FORK_STEP_INVALID = "fork_step_invalid"
    RUN_CANCELLED = "run_cancelled"
    RUN_ALREADY_FINISHED = "run_already_finished"
    RUN_NOT_AWAITING_INPUT = "run_not_awaiting_input"
    PERMISSION_DENIED = "permission_denied"
    CHILD_SESSION_REFUSED = "child_session_refused"
    # execution
    PLANNER_FAILED = "planner_failed"
    PLANNER_UNAVAILABLE = "planner_unavailable"
    HANDLER_FAILED = "handler_failed"
    HANDLER_TIMEOUT = "handler_timeout"
    INPUT_RESOLUTION_FAILED = "input_resolution_failed"
    CALL_IN_DOUBT = "call_in_doubt"
    OUTPUT_INVALID = "output_invalid"
    UPSTREAM_UNAVAILABLE = "upstream_unavailable"
    OC_STALLED = "oc_stalled"
    OC_TIMEOUT = "oc_timeout"
    PERMISSION_UNANSWERED = "permission_unanswered"
    TURN_INTERRUPTED = "turn_interrupted"
    EXECUTOR_UNAVAILABLE = "executor_unavailable"
    EXECUTOR_PANIC = "executor_panic"
    PROTOCOL_VIOLATION = "protocol_violation"
    EXPLAIN_UNAVAILABLE = "explain_unavailable"
    EXPLAIN_INVALID = "explain_invalid"
    BUDGET_EXCEEDED = "budget_exceeded"
    SANDBOX_UNAVAILABLE = "sandbox_unavailable"
    MCP_TOOL_CHANGED = "mcp_tool_changed"
    MCP_TOOL_NOT_ALLOWED = "mcp_tool_not_allowed"

    # OPA archives: refused before anything is stored or extracted
    OPA_NOT_ZIP = "opa_not_zip"
    OPA_ZIP_CORRUPT = "opa_zip_corrupt"
    OPA_PATH_UNSAFE = "opa_path_unsafe"
    OPA_DUPLICATE_ENTRY = "opa_duplicate_entry"
    OPA_LIMIT_EXCEEDED = "opa_limit_exceeded"
    OPA_ZIP_BOMB = "opa_zip_bomb"
    OPA_ENCRYPTED = "opa_encrypted"
    OPA_MANIFEST_INVALID = "opa_manifest_invalid"
    OPA_VERSION_UNSUPPORTED = "opa_version_unsupported"
    OPA_PROMPT_INVALID = "opa_prompt_invalid"
    OPA_HISTORY_INVALID = "opa_history_invalid"
    OPA_SIGNATURE_INVALID = "opa_signature_invalid"
    OPA_SIGNATURE_WEAK = "opa_signature_weak"
    OPA_SIGNER_UNTRUSTED = "opa_signer_untrusted"
    OPA_UNSIGNED_FILE = "opa_unsigned_file"
    OPA_UNSIGNED_REFUSED = "opa_unsigned_refused"
    OPA_CONTEXT_TOO_LONG = "opa_context_too_long"
    OPA_RECIPE_NOT_ALLOWED = "opa_recipe_not_allowed"
    OPA_OUTPUT_UNAVAILABLE = "opa_output_unavailable"
    # infrastructure
    DATABASE_UNAVAILABLE = "database_unavailable"
    CORRUPT_RECORD = "corrupt_record"
    NO_WORKER = "no_worker"
    CONFIG_INVALID = "config_invalid"
    INTERNAL_ERROR = "internal_error"
    STORAGE_FULL = "storage_full"

    @property
    def spec(self) -> ErrorSpec:
        return _SPECS[self]

    @property
    def http_status(self) -> int:
        return self.spec.http_status

    @property
    def retryable(self) -> bool:
        return self.spec.retryable


_SPECS: dict[ErrorCode, ErrorSpec] = {
    ErrorCode.INVALID_JSON: ErrorSpec(1001, 400, False, "The body is not valid JSON."),
    ErrorCode.INVALID_REQUEST: ErrorSpec(
        1002, 422, False, "The body or a parameter does not match its schema."
    ),
    ErrorCode.UNSUPPORTED_MEDIA_TYPE: ErrorSpec(
        1003,
        415,
        False,
        "The body must be application/json (POST /intent also takes an OPA archive).",
    ),
    ErrorCode.PAYLOAD_TOO_LARGE: ErrorSpec(1004, 413, False, "The body exceeds the size limit."),
    ErrorCode.UNKNOWN_RECIPE: ErrorSpec(1005, 422, False, "No recipe has that id."),
    ErrorCode.UNKNOWN_PROFILE: ErrorSpec(1006, 422, False, "No policy profile has that id."),
    ErrorCode.UNKNOWN_TOOL_POOL: ErrorSpec(1007, 422, False, "No tool pool has that id."),
    ErrorCode.IDEMPOTENCY_CONFLICT: ErrorSpec(
        1008, 409, False, "The Idempotency-Key was already used with a different body."
    ),
    ErrorCode.NOT_FOUND: ErrorSpec(1009, 404, False, "No such route."),
    ErrorCode.METHOD_NOT_ALLOWED: ErrorSpec(
        1010, 405, False, "The route does not take that method."
    ),
    ErrorCode.UNAUTHORIZED: ErrorSpec(1011, 401, False, "No valid bearer token was presented."),
    ErrorCode.FORBIDDEN: ErrorSpec(
        1012, 403, False, "The token's identity lacks the role this needs, or speaks for another."
    ),
    ErrorCode.BUDGET_WIDENED: ErrorSpec(
        1013, 422, False, "The intent asks for a budget above its policy profile's limit."
    ),
    ErrorCode.BODY_TIMEOUT: ErrorSpec(
        1014, 408, True, "The body did not arrive in time (fewer bytes than Content-Length said)."
    ),
    ErrorCode.JSON_TOO_DEEP: ErrorSpec(
        1015, 400, False, "The body's JSON nests arrays and objects deeper than 64 levels."
    ),
    ErrorCode.TOKEN_EXPIRED: ErrorSpec(
        1016, 401, False, "The bearer token expired, or was rotated and its grace period ended."
    ),
    ErrorCode.TOKEN_REVOKED: ErrorSpec(1017, 401, False, "The bearer token was revoked."),
    ErrorCode.RATE_LIMITED: ErrorSpec(
        1018, 429, True, "Too many requests from this address or identity; wait Retry-After s."
    ),
    ErrorCode.HEADERS_TOO_LARGE: ErrorSpec(
        1019, 431, False, "Too many request headers, or one or all of them too long."
    ),
    ErrorCode.OVERLOADED: ErrorSpec(
        1020,
        503,
        True,
        "The queue holds as many runs as the deployment allows (GATEHOUSE_MAX_QUEUED); the"
        " intent was not stored; send it again after Retry-After s.",
    ),
    ErrorCode.QUEUE_SHARE_EXCEEDED: ErrorSpec(
        1021,
        429,
        True,
        "This submitter already has as many runs queued as one may"
        " (GATEHOUSE_MAX_QUEUED_PER_SUBMITTER); the intent was not stored; retry later.",
    ),
    ErrorCode.PLAN_INVALID: ErrorSpec(2001, 422, False, "The plan does not match its schema."),
    ErrorCode.PLAN_CONTAINS_RESULTS: ErrorSpec(
        2002, 422, False, "The plan carries execution results; a planner may only propose."
    ),
    ErrorCode.UNKNOWN_CONNECTOR: ErrorSpec(
        2003, 422, False, "A step names a connector that is not in the tool pool."
    ),
    ErrorCode.DRIVER_NOT_ALLOWED: ErrorSpec(
        2004, 422, False, "A step's driver kind is unknown or differs from its connector's."
    ),
    ErrorCode.COMMAND_NOT_ALLOWED: ErrorSpec(
        2005, 422, False, "A shell step's command or arguments are not allowlisted."
    ),
    ErrorCode.DESTINATION_NOT_ALLOWED: ErrorSpec(
        2006, 422, False, "An http step's destination is not allowlisted."
    ),
    ErrorCode.LIMITS_MISSING: ErrorSpec(
        2007, 422, False, "A connector used by the plan declares no limits."
    ),
    ErrorCode.TOO_MANY_STEPS: ErrorSpec(
        2008, 422, False, "The plan has more steps than the profile allows."
    ),
    ErrorCode.PLAN_TAMPERED: ErrorSpec(
        2009, 409, False, "The stored plan no longer matches the digest that was approved."
    ),
    ErrorCode.TAINTED_INPUT: ErrorSpec(
        2013,
        422,
        False,
        "A value from outside the approved plan (an earlier step's output) would fill a"
        " position the profile does not mark as data: a destination, a program or its flags,"
        " or an instruction to an agent.",
    ),
    ErrorCode.REPAIR_REFUSED: ErrorSpec(
        2012,
        422,
        False,
        "A repaired plan changes steps that already ran, reuses their ids, or changes nothing.",
    ),
    ErrorCode.RUN_NOT_FOUND: ErrorSpec(3001, 404, False, "No run has that id."),
    ErrorCode.STALE_PLAN_DIGEST: ErrorSpec(
        3002, 409, False, "The decision names a plan digest that is not the run's plan."
    ),
    ErrorCode.ALREADY_DECIDED: ErrorSpec(
        3003, 409, False, "This plan digest already has a different decision."
    ),
    ErrorCode.RUN_NOT_AWAITING_APPROVAL: ErrorSpec(
        3004, 409, False, "The run has finished or never waits for approval."
    ),
    ErrorCode.APPROVAL_TIMEOUT: ErrorSpec(
        3005, 408, False, "No decision arrived before the approval deadline."
    ),
    ErrorCode.ARTIFACT_NOT_FOUND: ErrorSpec(3006, 404, False, "No artifact has that digest."),
    ErrorCode.FOUR_EYES: ErrorSpec(
        3007, 403, False, "The identity that submitted a run may not decide on its plan."
    ),
    ErrorCode.CALL_NOT_FOUND: ErrorSpec(3008, 404, False, "No ledger entry has that op_key."),
    ErrorCode.CALL_NOT_IN_DOUBT: ErrorSpec(
        3009, 409, False, "The call is not waiting for an operator, or was resolved otherwise."
    ),
    ErrorCode.RUN_NOT_FINISHED: ErrorSpec(
        3010, 409, False, "Replay, fork and explain need a run that has finished."
    ),
    ErrorCode.FORK_STEP_INVALID: ErrorSpec(
        3011, 422, False, "The parent run has no such step, or never reached it."
    ),
    ErrorCode.RUN_CANCELLED: ErrorSpec(3012, 409, False, "The run was cancelled."),
    ErrorCode.RUN_ALREADY_FINISHED: ErrorSpec(
        3013, 409, False, "The run has already finished; there is nothing to cancel."
    ),
    ErrorCode.RUN_NOT_AWAITING_INPUT: ErrorSpec(
        3014,
        409,
        False,
        "The run takes no follow-up message: it is not an interactive OPA run, or it has ended.",
    ),
    ErrorCode.PERMISSION_DENIED: ErrorSpec(
        2010,
        403,
        False,
        "The policy profile refused an executor's permission ask; the tool did not run.",
    ),
    ErrorCode.CHILD_SESSION_REFUSED: ErrorSpec(
        2011, 403, False, "An executor session with a parent (a child session) was refused."
    ),
    ErrorCode.PLANNER_FAILED: ErrorSpec(
        4001, 502, True, "The planner answered with an error or an invalid plan."
    ),
    ErrorCode.PLANNER_UNAVAILABLE: ErrorSpec(
        4002, 503, True, "The recipe needs a model planner and none is configured."
    ),
    ErrorCode.HANDLER_FAILED: ErrorSpec(4003, 502, False, "A step's handler reported failure."),
    ErrorCode.HANDLER_TIMEOUT: ErrorSpec(4004, 504, True, "A step's handler ran past its timeout."),
    ErrorCode.INPUT_RESOLUTION_FAILED: ErrorSpec(
        4005, 422, False, "A step's input_from did not resolve to an object."
    ),
    ErrorCode.CALL_IN_DOUBT: ErrorSpec(
        4006,
        409,
        False,
        "A call to a callee without idempotency keys was interrupted; an operator must decide.",
    ),
    ErrorCode.OUTPUT_INVALID: ErrorSpec(
        4007, 502, False, "A step's output does not match the schema the plan declared for it."
    ),
    ErrorCode.UPSTREAM_UNAVAILABLE: ErrorSpec(
        4008,
        503,
        True,
        "The callee refused the connection or answered 429/503: the call did not take effect.",
    ),
    ErrorCode.OC_STALLED: ErrorSpec(
        4009,
        504,
        True,
        "An OpenCode turn went quiet or ran out of time; it was aborted and reverted.",
    ),
    ErrorCode.OC_TIMEOUT: ErrorSpec(
        4010,
        504,
        False,
        "An OpenCode step timed out and the timeout ladder (revert, shrink scope) did not"
        " recover it; the workspace was restored.",
    ),
    ErrorCode.PERMISSION_UNANSWERED: ErrorSpec(
        4011, 504, False, "An executor's permission ask could not be answered within its limit."
    ),
    ErrorCode.TURN_INTERRUPTED: ErrorSpec(
        4012,
        503,
        True,
        "A worker crash cut an OpenCode turn off; its effects were reverted and it is sent"
        " again as a new attempt.",
    ),
    ErrorCode.EXECUTOR_UNAVAILABLE: ErrorSpec(
        4013, 503, True, "The OpenCode server could not be started or reached."
    ),
    ErrorCode.EXECUTOR_PANIC: ErrorSpec(
        4014,
        502,
        False,
        "A step's handler raised instead of answering; the coordinator recovered and recorded"
        " it as an error result.",
    ),
    ErrorCode.PROTOCOL_VIOLATION: ErrorSpec(
        4015,
        502,
        False,
        "A handler answered with something that is not a valid result for its envelope;"
        " the run ends (a hard failure).",
    ),
    ErrorCode.EXPLAIN_UNAVAILABLE: ErrorSpec(
        4016,
        503,
        True,
        "Explain needs a model and none is configured, or it could not be reached.",
    ),
    ErrorCode.EXPLAIN_INVALID: ErrorSpec(
        4017,
        502,
        True,
        "The model's explain report is not JSON matching the report schema; asking again"
        " asks anew.",
    ),
    ErrorCode.BUDGET_EXCEEDED: ErrorSpec(
        4018,
        429,
        False,
        "The run spent one of its budgets (steps, model turns, tokens, cost, wall time);"
        " it was stopped, and the budget is named.",
    ),
    ErrorCode.SANDBOX_UNAVAILABLE: ErrorSpec(
        4019,
        503,
        False,
        "A shell step or an OpenCode turn needs a sandbox and this worker cannot set one up"
        " (no bubblewrap, or it cannot create namespaces: see gatehouse doctor); it was not"
        " run bare.",
    ),
    ErrorCode.MCP_TOOL_CHANGED: ErrorSpec(
        4020,
        502,
        False,
        "An MCP server's live definition of a tool (name, description, input schema) differs"
        " from the pin in the tool pool; the call was not sent.",
    ),
    ErrorCode.MCP_TOOL_NOT_ALLOWED: ErrorSpec(
        4021,
        422,
        False,
        "An mcp_proxy step names a tool its connector does not allow (or has not pinned).",
    ),
    ErrorCode.OPA_NOT_ZIP: ErrorSpec(
        1101,
        415,
        False,
        "The upload is not a ZIP archive (no end of central directory record).",
    ),
    ErrorCode.OPA_ZIP_CORRUPT: ErrorSpec(
        1102,
        422,
        False,
        "The archive's ZIP structure is damaged, ambiguous or unsupported: local headers"
        " disagree with the central directory, a CRC or size does not match, junk around"
        " the directory, ZIP64, split archives, or a compression method other than stored"
        " or deflated.",
    ),
    ErrorCode.OPA_PATH_UNSAFE: ErrorSpec(
        1103,
        422,
        False,
        "An entry's path is unsafe (.. or . components, absolute, backslash, drive letter"
        " or colon, NUL or control characters, empty components), or an entry is a"
        " symbolic link or special file, or would land outside the extraction root; the"
        " whole archive is refused.",
    ),
    ErrorCode.OPA_DUPLICATE_ENTRY: ErrorSpec(
        1104,
        422,
        False,
        "Two entries have the same name, also after case folding and Unicode"
        " normalisation, or a file sits where another entry needs a folder.",
    ),
    ErrorCode.OPA_LIMIT_EXCEEDED: ErrorSpec(
        1105,
        413,
        False,
        "The archive exceeds a limit: its size, entry count, an entry's or the total"
        " uncompressed size, a name's length, the folder depth or the manifest's size.",
    ),
    ErrorCode.OPA_ZIP_BOMB: ErrorSpec(
        1106,
        413,
        False,
        "The archive looks like a zip bomb: a compression ratio past the limit, or"
        " entries that overlap (share compressed data).",
    ),
    ErrorCode.OPA_ENCRYPTED: ErrorSpec(
        1107,
        422,
        False,
        "An entry is encrypted; encrypted archives are refused.",
    ),
    ErrorCode.OPA_MANIFEST_INVALID: ErrorSpec(
        1108,
        422,
        False,
        "META-INF/MANIFEST.MF is missing or not a valid JAR manifest (72-byte lines,"
        " continuations, Name: Value headers), or a required or known attribute is missing"
        " or wrong.",
    ),
    ErrorCode.OPA_VERSION_UNSUPPORTED: ErrorSpec(
        1109,
        422,
        False,
        "The manifest's OPA-Version is not one Gatehouse reads.",
    ),
    ErrorCode.OPA_PROMPT_INVALID: ErrorSpec(
        1110,
        422,
        False,
        "The prompt file the manifest names is missing, is a folder, or is not UTF-8 text.",
    ),
    ErrorCode.OPA_HISTORY_INVALID: ErrorSpec(
        1111,
        422,
        False,
        "The session history is not JSON matching the OPA history schema.",
    ),
    ErrorCode.OPA_SIGNATURE_INVALID: ErrorSpec(
        1112,
        422,
        False,
        "The archive's signature does not verify: a digest in the .SF or the manifest"
        " does not match, the PKCS#7 block is malformed or does not verify, or signature"
        " files are missing or extra.",
    ),
    ErrorCode.OPA_SIGNATURE_WEAK: ErrorSpec(
        1113,
        422,
        False,
        "The signature uses a digest Gatehouse refuses (MD5, SHA-1); SHA-256 or stronger"
        " is required.",
    ),
    ErrorCode.OPA_SIGNER_UNTRUSTED: ErrorSpec(
        1114,
        422,
        False,
        "The signer's certificate is not in the trust store nor issued by a CA in it, or"
        " it (or its issuer) is expired or not yet valid.",
    ),
    ErrorCode.OPA_UNSIGNED_FILE: ErrorSpec(
        1115,
        422,
        False,
        "A signed archive holds a file the manifest's digests do not cover (added after signing).",
    ),
    ErrorCode.OPA_UNSIGNED_REFUSED: ErrorSpec(
        1116,
        403,
        False,
        "An unsigned archive may not run in autonomous mode unless the policy profile allows it.",
    ),
    ErrorCode.OPA_CONTEXT_TOO_LONG: ErrorSpec(
        1117,
        422,
        False,
        "The archive's context (system messages, history, prompt) makes an objective longer"
        " than an intent's limit of 2000 characters.",
    ),
    ErrorCode.OPA_RECIPE_NOT_ALLOWED: ErrorSpec(
        1119,
        403,
        False,
        "The policy profile does not let archives run under the recipe asked for, or names"
        " no recipe for archives at all (its opa section).",
    ),
    ErrorCode.OPA_OUTPUT_UNAVAILABLE: ErrorSpec(
        1120,
        409,
        False,
        "The run has no output archive: it was not submitted as an OPA archive, or its"
        " output has not been packed yet (the details say which).",
    ),
    ErrorCode.DATABASE_UNAVAILABLE: ErrorSpec(
        5001, 503, True, "The database cannot be reached; retry later."
    ),
    ErrorCode.CORRUPT_RECORD: ErrorSpec(
        5002, 500, False, "A stored record failed validation when read back."
    ),
    ErrorCode.NO_WORKER: ErrorSpec(
        5004, 503, True, "No worker took the job in time; check that a worker is running."
    ),
    ErrorCode.INTERNAL_ERROR: ErrorSpec(5003, 500, True, "An unexpected error; see the logs."),
    ErrorCode.CONFIG_INVALID: ErrorSpec(
        5005,
        500,
        False,
        "dbos-config.yaml or the notifications file cannot be read, is not YAML,"
        " or has a wrong value.",
    ),
    ErrorCode.STORAGE_FULL: ErrorSpec(
        5006,
        507,
        True,
        "The disk holding the database, the workspaces or the evidence files is full;"
        " nothing was stored; send it again after Retry-After s, once space is freed.",
    ),
}


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
