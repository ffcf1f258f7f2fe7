"""Names no person's identity may be (``contracts.identities``), and the one refusal
every door that makes an identity gives: a token, an OIDC sign-in, a Slack mapping."""

from __future__ import annotations

from contracts import RESERVED_PREFIXES, ErrorCode, GatehouseError, reserved_identity

__all__ = ["refuse_reserved", "reserved_reason"]


def reserved_reason(name: str) -> str | None:
    """Why ``name`` may not be a person's identity, None when it may."""
    found = reserved_identity(name)
    if found is None:
        return None
    what = f"begins with {found!r}" if found in RESERVED_PREFIXES else f"is {found!r}"
    return (
        f"the identity {name!r} {what}, a name Gatehouse records as its own actor"
        " (an automatic approval, a cancel through DBOS, …): no person may hold it"
    )


def refuse_reserved(name: str) -> None:
    """``identity_reserved`` when ``name`` is reserved."""
    reason = reserved_reason(name)
    if reason is not None:
        raise GatehouseError(ErrorCode.IDENTITY_RESERVED, reason, {"identity": name})
