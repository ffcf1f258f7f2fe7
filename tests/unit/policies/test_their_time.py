"""The rules of a run's time (``policies.their_time``), resolved one way for a replay and
a what-if: the kept version by the digest the run recorded, today's file when it is that
version or none was kept, and a kept body that does not load or no longer has its digest
refused, never replaced by today's file."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from contracts import ErrorCode, GatehouseError, PolicyProfile, sha256_hex
from policies import catalog
from policies.catalog import Loaded
from policies.their_time import Kept, cedar_rules, version

TODAY = catalog.profile("default")


@dataclass(frozen=True)
class _Body:
    policy_id: str
    body: str


def _kept(*bodies: str) -> dict[str, Kept]:
    return {sha256_hex(b.encode("utf-8")): _Body("default", b) for b in bodies}


OLDER = TODAY.text.replace('"version": "', '"version": "0.', 1)
assert TODAY.text != OLDER  # another version of the same profile


def test_today_when_the_run_recorded_today_s_version_or_none() -> None:
    assert version(PolicyProfile, TODAY, TODAY.digest, _kept().get) is TODAY
    assert version(PolicyProfile, TODAY, None, _kept().get) is TODAY


def test_the_kept_version_when_the_run_recorded_another() -> None:
    kept = _kept(OLDER)
    (digest,) = kept
    found = version(PolicyProfile, TODAY, digest, kept.get)
    assert isinstance(found, Loaded) and found.digest == digest and found.text == OLDER
    # and when the file is no longer in force at all
    assert version(PolicyProfile, None, digest, kept.get) == found


def test_none_kept_is_today_s_file_or_nothing() -> None:
    assert version(PolicyProfile, TODAY, "1" * 64, _kept().get) is TODAY
    assert version(PolicyProfile, None, "1" * 64, _kept().get) is None


def test_a_kept_body_with_another_digest_is_refused() -> None:
    moved = {"1" * 64: _Body("default", OLDER)}
    with pytest.raises(GatehouseError) as refused:
        version(PolicyProfile, TODAY, "1" * 64, moved.get)
    assert refused.value.code is ErrorCode.CORRUPT_RECORD


def test_a_kept_body_that_does_not_load_is_refused() -> None:
    kept = _kept("{not a profile")
    (digest,) = kept
    with pytest.raises(GatehouseError) as refused:
        version(PolicyProfile, TODAY, digest, kept.get)
    assert refused.value.code is ErrorCode.CORRUPT_RECORD


def test_the_cedar_set_in_force_or_the_kept_one_or_none() -> None:
    guarded = catalog.profile("guarded").model
    assert guarded.cedar_rules is not None
    in_force = guarded.cedar_rules
    assert cedar_rules(guarded, in_force.digest, _kept().get) == in_force
    assert cedar_rules(guarded, None, _kept().get) == in_force
    older = in_force.text + "\n// an older version\n"
    kept = {sha256_hex(older.encode("utf-8")): _Body("guardrails", older)}
    (digest,) = kept
    found = cedar_rules(guarded, digest, kept.get)
    assert found is not None and (found.digest, found.text) == (digest, older)
    with pytest.raises(GatehouseError):  # kept under a digest it no longer has
        cedar_rules(guarded, "1" * 64, {"1" * 64: _Body("guardrails", older)}.get)
    plain = guarded.model_copy(update={"cedar": None, "cedar_rules": None})
    assert cedar_rules(plain, digest, kept.get) is None
