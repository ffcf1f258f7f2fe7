"""Identity names Gatehouse records as its own actors, which no person may take.

Gatehouse writes some names into the same columns and fields where people's
identities go (``plan_approvals.decided_by``, ``run_cancels.requested_by``, an
episode's ``executor_id``). A person whose identity were one of them would read,
on every record and screen, as Gatehouse itself: an approval by an IdP account
named ``policy:auto-read-only`` would look automatic. So no token, no OIDC
sign-in and no Slack mapping may make an identity that is reserved here.

The rule: a name is reserved when, with every control, format, separator and
unassigned character removed, NFKC-normalised and case-folded, it is one of
``RESERVED_NAMES`` or begins with one of ``RESERVED_PREFIXES``. The identity
grammar (``Identifier``: lower-case ASCII letters, digits, ``. _ : -``) already
refuses ``Policy:x``, `` policy:x`` or a full-width colon; the rule does not lean
on it, so a looser grammar later cannot reopen the hole.

A new name Gatehouse writes as an actor goes here, with where it is written.
"""

from __future__ import annotations

import unicodedata
from typing import Final

__all__ = ["POLICY_ACTOR_PREFIX", "RESERVED_NAMES", "RESERVED_PREFIXES", "reserved_identity"]

# worker/records/_gate.py: an automatic approval's decided_by is "policy:<profile id>".
POLICY_ACTOR_PREFIX: Final = "policy:"

RESERVED_PREFIXES: Final[tuple[str, ...]] = (
    POLICY_ACTOR_PREFIX,
    # kept for Gatehouse's own actors to come (a reaper ending a run, a sweep), so
    # they have a namespace no person can already hold
    "system:",
    # Gatehouse's own name as a namespace: security event types are "gatehouse:<code>"
    # (policies/episodes.py SECURITY_EVENT_NAMESPACE)
    "gatehouse:",
    # shim/local/_up.py names its workers worker-1, worker-2, …; a worker's default
    # executor id is worker-<host> (worker/runtime/_settings.py); both are the
    # executor_id of the episodes a worker records, the field a person's name fills
    # in the episodes the shim records for them
    "worker-",
)

RESERVED_NAMES: Final[frozenset[str]] = frozenset(
    {
        # worker/durable/_cancel.py: run_cancels.requested_by of a cancel made through
        # DBOS; shim/api/services/cancel.py answers it as cancelled_by
        "dbos",
        # run_cancels.source of a cancel through the API (contracts/cancel.py)
        "gatehouse",
        # shim/api/services/refusals.py: the executor_id of every refused request's
        # security event
        "gatehouse-shim",
        # the default of every acting field of a request body (decided_by,
        # cancelled_by, submitted_by, sent_by, resolved_by, requested_by) before the
        # caller's name replaces it
        "anonymous",
    }
)

# Characters that change nothing a person reads, or are invisible: removed before
# the comparison so they cannot hide a reserved name.
_DROPPED = ("C", "Z")


def _folded(name: str) -> str:
    kept = "".join(ch for ch in name if unicodedata.category(ch)[0] not in _DROPPED)
    # NFKC before and after case-folding: folding can undo a normal form.
    return unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", kept).casefold())


def reserved_identity(name: str) -> str | None:
    """The reserved name or prefix ``name`` is taken as (see the module), None when
    a person may hold it."""
    folded = _folded(name)
    if folded in RESERVED_NAMES:
        return folded
    for prefix in RESERVED_PREFIXES:
        if folded.startswith(prefix):
            return prefix
    return None
