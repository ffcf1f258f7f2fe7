"""A run as the CLI shows it to a person (``run_card``): the run, its plan card (digest,
revision, decision, risk, who wrote it), what changed since the plan decided before,
and every step with its whole input and what it did; for a plan that waits, what the
reader can do next. Built from ``shim.cli.render``'s tables."""

from __future__ import annotations

from rich.table import Table

from contracts import JsonValue, RunStatus, RunView, StepView, shown_input, visible
from policies.taint import tainted
from shim.cli.render import cli_table, fields, short

__all__ = ["run_card"]


def _step_outcome(step: StepView | None) -> str:
    if step is None:
        return "not run"
    if step.status == "failed":
        return f"failed: {step.error_code or ''} {short(step.error_message or '', 50)}".strip()
    out = step.output or {}
    if "stdout" in out:
        return f"{step.status}: {short(out['stdout'], 50)}"
    if "status" in out and "bytes" in out:
        return f"{step.status}: HTTP {out['status']}, {out['bytes']} bytes"
    return step.status


def _next_steps(view: RunView) -> dict[str, JsonValue]:
    """What the reader can do about a plan that waits for a decision: approve it, for a
    reader who may decide (the run's links say so); else wait for one who may, and
    follow or withdraw the run meanwhile."""
    if "approve" in view.links:
        return {"approve with": f"gatehouse approve {view.run_id}"}
    steps: dict[str, JsonValue] = {
        "waiting for": "an approver's decision (this token cannot approve)",
        "follow with": f"gatehouse runs watch {view.run_id}",
    }
    if "cancel" in view.links:
        steps["withdraw with"] = f"gatehouse cancel {view.run_id}"
    return steps


def run_card(view: RunView) -> list[Table]:
    """The run, its plan card (digest, steps, what each did) and its decisions."""
    head: dict[str, JsonValue] = {
        "run": view.run_id,
        "status": view.status.value + (f" (phase {view.phase})" if view.phase else ""),
        "recipe": f"{view.recipe} ({view.mode})",
        "objective": visible(view.objective),
        "submitted by": view.submitted_by,
        "policy": f"profile {view.policy_profile}, tool pool {view.tool_pool}",
        "created": view.created_at,
        "updated": view.updated_at,
    }
    if view.error_code:
        head["error"] = f"{view.error_code}: {view.error_message or ''}"
    if view.parent_run_id:
        head["forked from"] = f"{view.parent_run_id} at step {view.fork_from_step}"
    if view.opa is not None:
        # The objective is outside data: say where it came from, and who vouches for it.
        signer = view.opa.signer
        by = "unsigned" if signer is None else f"signed by {signer.subject} ({signer.trusted_by})"
        head["source"] = (
            f"OPA archive {view.opa.archive_name} ({view.opa.execution_mode}),"
            f" sha256 {view.opa.archive_sha256[:16]}…, {by}"
        )
    out = [fields(f"Run {view.run_id}", head)]
    if view.budgets is not None and view.budgets.summary:
        spent = ", ".join(f"{k} {v}" for k, v in view.budgets.summary.items())
        exceeded = f" (exceeded: {view.budgets.exceeded})" if view.budgets.exceeded else ""
        # every budget, wrapped onto more lines as the width needs: fields' cut at 120
        # characters dropped the last ones (max_wall_s), whatever the terminal's width
        out[0].add_row("budgets", short(spent + exceeded, 4000))
    card = view.plan_card
    if card is None:
        return out
    # The card's own status (waiting_input, approved, …) is the plan's, not the run's:
    # the decision line says what a reader needs.
    decided = [a for a in view.approvals if a.plan_digest == card.plan_digest]
    decision = (
        f"{decided[-1].decision.value} by {decided[-1].decided_by} at {decided[-1].decided_at}"
        if decided
        else "none yet"
    )
    plan: dict[str, JsonValue] = {
        "digest": card.plan_digest,
        "revision": card.revision,
        "previous digest": card.previous_digest,
        "decision": decision,
    }
    if view.plan_risk is not None:  # (a shim from before it judged a plan's risk: none)
        plan["risk"] = view.plan_risk
    if any(a.part != "submitted" for a in view.plan_authors):
        # An edited or forked plan: all who wrote part of it, none of whom decides on it.
        plan["written by"] = ", ".join(visible(f"{a.name} ({a.part})") for a in view.plan_authors)
    if not decided and view.status is RunStatus.WAITING_APPROVAL:
        plan.update(_next_steps(view))
    out.append(fields("Plan card", plan))
    if card.changes:
        # A repaired or extended plan: what differs from the one decided before.
        changes = cli_table("change", "step", "what", title="Changes since the previous plan")
        for c in card.changes:
            if isinstance(c, dict):
                what = c.get("after", c.get("step"))
                changes.add_row(str(c.get("change")), str(c.get("step_id", "")), short(what, 80))
        out.append(changes)
    executed = {s.step_id: s for s in view.steps}
    steps = cli_table(
        "#", "step", "driver", "connector", "title", "input", "outcome", title="Steps"
    )
    outside = tainted(card.plan)
    for i, step in enumerate(card.plan.steps, 1):
        steps.add_row(
            str(i),
            step.step_id,
            step.driver_kind.value,
            step.connector_id,
            visible(step.title or ""),
            # every argument, in full, nothing hidden; outside data marked
            shown_input(step, step.step_id in outside, indent=None),
            _step_outcome(executed.get(step.step_id)),
        )
    out.append(steps)
    return out
