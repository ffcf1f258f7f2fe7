"""Beginning a run: the seed, the profile and tool pool it runs under."""

from __future__ import annotations

from contracts import (
    GatehouseError,
    JsonObject,
    RunStatus,
)
from ledger import Conn, policy_versions, runs
from policies import catalog, cedar_gate
from worker.flow import BeginResult, fresh_seed
from worker.records._cancels import observe_cancel
from worker.runtime import WorkerSettings

__all__ = ["begin"]


def begin(s: Conn, arg: JsonObject, me: WorkerSettings) -> JsonObject:
    """The run begun (its seed, profile and tool pool), and the cancel seen at its first
    boundary ``at``, in one commit: ``{begun: BeginResult, cancelled}``."""
    run_id = str(arg["run_id"])
    # The first boundary's cancel check, with this commit.
    cancelled = observe_cancel(s, run_id, str(arg["at"]), me.executor_id)
    return {"begun": _begun(s, run_id, arg, me), "cancelled": cancelled}


def _begun(s: Conn, run_id: str, arg: JsonObject, me: WorkerSettings) -> JsonObject:
    # The run's seed is chosen once, here, and recorded with this step: a
    # re-executed or replayed run draws the same choices from it.
    fresh = me.random_seed or fresh_seed()
    try:
        prof = catalog.profile(str(arg["policy_profile"]))
        pool = catalog.tool_pool(str(arg["tool_pool"]))
    except GatehouseError as exc:
        seed = runs.set_seed(s, run_id, fresh)
        return BeginResult(
            ok=False, seed=seed, error_code=exc.code.value, error_message=exc.message
        ).model_dump(mode="json")
    rules = prof.model.cedar_rules
    cedar_digest = None if rules is None else rules.digest
    # with the exact profile, tool pool and Cedar policy set files it is held to
    seed = runs.set_seed(s, run_id, fresh, (prof.digest, pool.digest, cedar_digest))
    runs.set_status(s, run_id, RunStatus.RUNNING, "compile")
    profile = prof.model
    if rules is not None:  # Cedar's requests are made for the run's submitter
        who = policy_versions.run_principal(s, run_id)
        profile = cedar_gate.bound(profile, None if who is None else who.submitted_by)
    return BeginResult(
        ok=True,
        profile=profile,
        profile_digest=prof.digest,
        tool_pool=pool.model,
        tool_pool_digest=pool.digest,
        seed=seed,
    ).model_dump(mode="json")
