"""The episodes an executor step (opencode) leaves: one per thing OpenCode did.

Pure: built from the step's recorded outcome, which holds every turn's
activity (tool calls, file edits with digests before and after, permission
answers, child-session sightings), each stalled turn's diagnostics, and the
timeout ladder. Episode ids derive from the turn's op_key and the item's
place, so recording a step again stores nothing new.

Security episodes: a permission ask the profile rejected (``permission_denied``)
and a child session (``child_session_refused``).
"""

from __future__ import annotations

from contracts import Episode, ErrorCode, JsonObject, JsonValue, SecurityEpisode
from policies.episodes import episode, security_episode

__all__ = ["executor_episodes"]


def _turns(output: JsonObject) -> list[JsonObject]:
    """Each turn's output: the ladder's set-aside turns first, then the final one."""
    turns: list[JsonObject] = []
    ladder = output.get("ladder")
    for rung in ladder if isinstance(ladder, list) else []:
        if isinstance(rung, dict) and isinstance(rung.get("output"), dict):
            inner = rung["output"]
            assert isinstance(inner, dict)
            turns.append({**inner, "op_key": rung.get("op_key")})
    if "activity" in output:
        turns.append(output)
    return turns


def executor_episodes(
    *,
    run_id: str,
    step_id: str,
    op_key: str | None,
    output: JsonObject,
    executor_id: str,
    recorded_at: str,
    profile_id: str | None = None,
) -> list[Episode | SecurityEpisode]:
    out: list[Episode | SecurityEpisode] = []
    for turn in _turns(output):
        key = str(turn.get("op_key") or op_key or "")
        tag = f"{step_id}:{key[:16]}"
        activity = turn.get("activity")
        for index, item in enumerate(activity if isinstance(activity, list) else []):
            if isinstance(item, dict):
                out.append(
                    _item(
                        run_id,
                        step_id,
                        f"{tag}:{index}",
                        op_key=key,
                        item=item,
                        executor_id=executor_id,
                        recorded_at=recorded_at,
                        profile_id=profile_id,
                    )
                )
        diagnostics = turn.get("diagnostics")
        if isinstance(diagnostics, dict):
            out.append(
                episode(
                    run_id=run_id,
                    kind="opencode_stall",
                    subject=tag,
                    episode_type="execution/opencode_stall",
                    status="failed",
                    summary=f"step {step_id}: turn stopped: {diagnostics.get('reason')}",
                    executor_id=executor_id,
                    recorded_at=recorded_at,
                    details={
                        "step_id": step_id,
                        "op_key": key,
                        "diagnostics": diagnostics,
                        "restored_by": turn.get("restored_by"),
                        "workspace_before": turn.get("workspace_before"),
                        "workspace_after": turn.get("workspace_after"),
                    },
                )
            )
    ladder = output.get("ladder")
    if isinstance(ladder, list) and ladder:
        rungs: list[JsonValue] = [
            {k: r.get(k) for k in ("op_key", "attempt", "error_code", "error_message")}
            for r in ladder
            if isinstance(r, dict)
        ]
        out.append(
            episode(
                run_id=run_id,
                kind="timeout_ladder",
                subject=step_id,
                episode_type="execution/timeout_ladder",
                status="completed" if "activity" in output else "failed",
                summary=f"step {step_id}: {len(rungs)} turn(s) set aside by the timeout ladder",
                executor_id=executor_id,
                recorded_at=recorded_at,
                details={"step_id": step_id, "rungs": rungs},
            )
        )
    return out


def _item(
    run_id: str,
    step_id: str,
    subject: str,
    *,
    op_key: str,
    item: JsonObject,
    executor_id: str,
    recorded_at: str,
    profile_id: str | None,
) -> Episode | SecurityEpisode:
    kind = str(item.get("kind"))
    details: JsonObject = {"step_id": step_id, "op_key": op_key, "activity": item}
    refusal = _refusal(kind, item, step_id)
    if refusal is not None:
        code, message = refusal
        return security_episode(
            run_id=run_id,
            subject=f"{code.value}:{subject}",
            code=code,
            message=message,
            executor_id=executor_id,
            recorded_at=recorded_at,
            details=details,
            profile_id=profile_id,
        )
    failed = item.get("status") == "error"
    what = {
        "tool": f"tool {item.get('tool')} {item.get('status')}",
        "file": f"file {item.get('path')} edited",
        "permission": f"permission {item.get('permission')} answered {item.get('decision')}",
    }.get(kind, kind)
    return episode(
        run_id=run_id,
        kind=f"opencode_{kind}",
        subject=subject,
        episode_type=f"execution/opencode_{kind}",
        status="failed" if failed else "completed",
        summary=f"step {step_id}: {what}",
        executor_id=executor_id,
        recorded_at=recorded_at,
        details=details,
    )


def _refusal(kind: str, item: JsonObject, step_id: str) -> tuple[ErrorCode, str] | None:
    """The security event an activity item is, if it is one."""
    if kind == "permission" and item.get("decision") == "reject":
        return ErrorCode.PERMISSION_DENIED, (
            f"step {step_id}: OpenCode asked for {item.get('permission')!r};"
            " the policy profile refused it"
        )
    if kind == "child_session":
        return ErrorCode.CHILD_SESSION_REFUSED, (
            f"step {step_id}: a child session appeared ({item.get('session_id')});"
            " the turn was aborted"
        )
    return None
