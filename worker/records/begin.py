"""Beginning a run: the seed, the profile and tool pool it runs under."""

from __future__ import annotations

from contracts import (
    GatehouseError,
    JsonObject,
    RunStatus,
)
from ledger import Conn, runs
from policies import catalog
from worker._runtime import runtime
from worker.flow import BeginResult, fresh_seed
from worker.records._tx import exec_id, session, tx
from worker.records.cancels import observe_cancel

__all__ = ["begin_run"]


def _begin(arg: JsonObject) -> JsonObject:
    run_id = str(arg["run_id"])
    s = session()
    # The first boundary's cancel check, with this commit.
    cancelled = observe_cancel(s, run_id, str(arg["at"]), exec_id())
    return {"begun": _begun(s, run_id, arg), "cancelled": cancelled}


def _begun(s: Conn, run_id: str, arg: JsonObject) -> JsonObject:
    # The run's seed is chosen once, here, and recorded with this step: a
    # re-executed or replayed run draws the same choices from it.
    seed = runs.set_seed(s, run_id, runtime().settings.random_seed or fresh_seed())
    try:
        prof = catalog.profile(str(arg["policy_profile"]))
        pool = catalog.tool_pool(str(arg["tool_pool"]))
    except GatehouseError as exc:
        return BeginResult(
            ok=False, seed=seed, error_code=exc.code.value, error_message=exc.message
        ).model_dump(mode="json")
    runs.set_status(s, run_id, RunStatus.RUNNING, "compile")
    runs.set_policy_digests(s, run_id, prof.digest, pool.digest)
    return BeginResult(
        ok=True,
        profile=prof.model,
        profile_digest=prof.digest,
        tool_pool=pool.model,
        tool_pool_digest=pool.digest,
        seed=seed,
    ).model_dump(mode="json")


def begin_run(
    run_id: str, policy_profile: str, tool_pool: str, at: str
) -> tuple[BeginResult, JsonObject | None]:
    """The run begun, and the cancel seen at boundary ``at`` (None: go on)."""
    out = tx(
        "gatehouse.begin",
        _begin,
        {"run_id": run_id, "policy_profile": policy_profile, "tool_pool": tool_pool, "at": at},
    )
    cancelled = out.get("cancelled")
    return (
        BeginResult.model_validate(out.get("begun")),
        cancelled if isinstance(cancelled, dict) else None,
    )
