"""How each refusal is classified as a MOVA security event (category, severity).

Categories are MOVA 4.1.1's (``ds.security_event_episode_core_v1``).
"""

from __future__ import annotations

from typing import TypeAlias

from contracts import ErrorCode
from contracts.episode import SecurityCategory, Severity

__all__ = ["Category", "Severity", "classify"]

Category: TypeAlias = SecurityCategory


_CLASSES: dict[ErrorCode, tuple[Category, Severity]] = {
    ErrorCode.UNAUTHORIZED: ("auth", "medium"),
    ErrorCode.TOKEN_EXPIRED: ("auth", "medium"),
    ErrorCode.TOKEN_REVOKED: ("auth", "medium"),
    ErrorCode.FORBIDDEN: ("authorization", "medium"),
    ErrorCode.FOUR_EYES: ("authorization", "high"),
    ErrorCode.STALE_PLAN_DIGEST: ("authorization", "medium"),
    ErrorCode.ALREADY_DECIDED: ("authorization", "low"),
    ErrorCode.PLAN_TAMPERED: ("data_access", "critical"),
    ErrorCode.CORRUPT_RECORD: ("data_access", "high"),
    ErrorCode.PLAN_CONTAINS_RESULTS: ("instruction_misuse", "high"),
    ErrorCode.UNKNOWN_CONNECTOR: ("policy_violation", "medium"),
    ErrorCode.DRIVER_NOT_ALLOWED: ("policy_violation", "medium"),
    ErrorCode.COMMAND_NOT_ALLOWED: ("policy_violation", "high"),
    ErrorCode.DESTINATION_NOT_ALLOWED: ("policy_violation", "high"),
    ErrorCode.MCP_TOOL_NOT_ALLOWED: ("policy_violation", "high"),
    ErrorCode.MCP_TOOL_CHANGED: ("instruction_misuse", "critical"),
    ErrorCode.LIMITS_MISSING: ("policy_violation", "medium"),
    ErrorCode.TOO_MANY_STEPS: ("policy_violation", "low"),
    ErrorCode.BUDGET_WIDENED: ("policy_violation", "low"),
    ErrorCode.OUTPUT_INVALID: ("policy_violation", "medium"),
    ErrorCode.PLAN_INVALID: ("policy_violation", "low"),
    ErrorCode.PAYLOAD_TOO_LARGE: ("rate_limit", "low"),
    ErrorCode.RATE_LIMITED: ("rate_limit", "low"),
    ErrorCode.HEADERS_TOO_LARGE: ("rate_limit", "low"),
    ErrorCode.UNKNOWN_PROFILE: ("config", "low"),
    ErrorCode.UNKNOWN_TOOL_POOL: ("config", "low"),
    ErrorCode.UNKNOWN_RECIPE: ("config", "low"),
    ErrorCode.CALL_IN_DOUBT: ("infrastructure", "high"),
    ErrorCode.WORKFLOW_LOST: ("infrastructure", "high"),
    ErrorCode.PERMISSION_DENIED: ("policy_violation", "medium"),
    ErrorCode.CHILD_SESSION_REFUSED: ("instruction_misuse", "high"),
    ErrorCode.PROTOCOL_VIOLATION: ("policy_violation", "high"),
    ErrorCode.REPAIR_REFUSED: ("policy_violation", "medium"),
    ErrorCode.TAINTED_INPUT: ("instruction_misuse", "high"),
    ErrorCode.CEDAR_DENIED: ("policy_violation", "high"),
    ErrorCode.CEDAR_POLICY_INVALID: ("config", "low"),
    ErrorCode.OVERLOADED: ("rate_limit", "low"),
    ErrorCode.QUEUE_SHARE_EXCEEDED: ("rate_limit", "low"),
    # OPA archives: a hostile archive is an attempt on the machine (paths, bombs) or on
    # the record (signatures); a merely broken one is low.
    ErrorCode.OPA_NOT_ZIP: ("other", "low"),
    ErrorCode.OPA_ZIP_CORRUPT: ("policy_violation", "medium"),
    ErrorCode.OPA_PATH_UNSAFE: ("policy_violation", "high"),
    ErrorCode.OPA_DUPLICATE_ENTRY: ("policy_violation", "high"),
    ErrorCode.OPA_LIMIT_EXCEEDED: ("rate_limit", "medium"),
    ErrorCode.OPA_ZIP_BOMB: ("policy_violation", "high"),
    ErrorCode.OPA_ENCRYPTED: ("policy_violation", "medium"),
    ErrorCode.OPA_MANIFEST_INVALID: ("policy_violation", "low"),
    ErrorCode.OPA_VERSION_UNSUPPORTED: ("config", "low"),
    ErrorCode.OPA_PROMPT_INVALID: ("policy_violation", "low"),
    ErrorCode.OPA_HISTORY_INVALID: ("policy_violation", "low"),
    ErrorCode.OPA_SIGNATURE_INVALID: ("data_access", "critical"),
    ErrorCode.OPA_SIGNATURE_WEAK: ("policy_violation", "high"),
    ErrorCode.OPA_SIGNER_UNTRUSTED: ("auth", "high"),
    ErrorCode.OPA_UNSIGNED_FILE: ("data_access", "critical"),
    ErrorCode.OPA_UNSIGNED_REFUSED: ("authorization", "medium"),
    ErrorCode.OPA_RECIPE_NOT_ALLOWED: ("authorization", "medium"),
    ErrorCode.OPA_CONTEXT_TOO_LONG: ("policy_violation", "low"),
}


def classify(code: ErrorCode) -> tuple[Category, Severity]:
    """Every refusal has a class; input that is merely malformed is ``other``/``low``."""
    return _CLASSES.get(code, ("other", "low"))
