"""The rules of a run's time: which version of a profile, a tool pool and a Cedar policy
set a run ran under, resolved one way wherever a recorded run is judged again (a
replay under its recorded rules, a what-if over recorded plans).

For each, the version kept by the digest the run recorded (``ledger.policy_versions``);
today's file when it is that very version, when the run recorded no digest, or when
none was kept (a run recorded before versions were kept: a changed file is then a
divergence a replay names). A kept body that does not load, or no longer has the
digest it is kept by, is refused (``corrupt_record``) wherever it is read: never a
silent fall back to today's rules. Pure: the caller reads the kept versions and
hands a lookup here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, TypeVar

from pydantic import BaseModel, ValidationError

from contracts import CedarRules, ErrorCode, GatehouseError, PolicyProfile, sha256_hex
from policies import catalog
from policies.catalog import Loaded

__all__ = ["Kept", "KeptLookup", "cedar_rules", "version"]

M = TypeVar("M", bound=BaseModel)


class Kept(Protocol):
    """A kept version's file, as ``ledger.policy_versions`` keeps it."""

    @property
    def policy_id(self) -> str: ...

    @property
    def body(self) -> str: ...


# The kept version with a digest, or None when none is kept by it.
KeptLookup = Callable[[str], Kept | None]


def _held(found: Kept, digest: str, what: str) -> str:
    """``found``'s body, refused when it no longer has ``digest``."""
    if sha256_hex(found.body.encode("utf-8")) != digest:
        raise GatehouseError(
            ErrorCode.CORRUPT_RECORD,
            f"the kept {what} {found.policy_id!r} no longer has digest {digest[:12]}",
            {"digest": digest},
        )
    return found.body


def version(
    model: type[M], today: Loaded[M] | None, recorded: str | None, kept: KeptLookup
) -> Loaded[M] | None:
    """The version of a profile or tool pool (``model``) the run ran under, recorded by
    digest ``recorded``; ``today``: the file in force now (None: none is). None when
    it is neither in force nor kept."""
    if today is not None and (recorded is None or recorded == today.digest):
        return today
    found = None if recorded is None else kept(recorded)
    if found is None or recorded is None:
        return today
    what = model.__name__
    body = _held(found, recorded, what)
    try:
        parsed = model.model_validate_json(body)
    except ValidationError as exc:
        raise GatehouseError(
            ErrorCode.CORRUPT_RECORD,
            f"the kept {what} {found.policy_id!r} ({recorded[:12]}) does not load: {exc}",
            {"digest": recorded},
        ) from exc
    return Loaded(parsed, recorded, body)


def cedar_rules(
    profile: PolicyProfile, recorded: str | None, kept: KeptLookup
) -> CedarRules | None:
    """The Cedar policy set ``profile`` names, as the run began under it (recorded by
    digest ``recorded``): the one the profile carries or the catalog holds when it is
    that version, else the kept one. None when the profile names none, or when it names
    one that is neither in force nor kept."""
    if profile.cedar is None:
        return None
    today = profile.cedar_rules
    if today is None:  # a kept profile version: its policy set is looked up here
        found_today = catalog.cedar_policy_set(profile.cedar)
        today = None if found_today is None else found_today.model
    if today is not None and (recorded is None or today.digest == recorded):
        return today
    found = None if recorded is None else kept(recorded)
    if found is None or recorded is None:
        return today
    body = _held(found, recorded, "Cedar policy set")
    return CedarRules(policy_set_id=found.policy_id, digest=recorded, text=body)
