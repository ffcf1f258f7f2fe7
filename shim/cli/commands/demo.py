"""``gatehouse demo``: one real run through every stage, on SQLite, offline.

The stack (``shim.local.demo_stack``) starts a worker and the shim as separate
processes on a fresh SQLite file and serves a small inventory service on
loopback; this submits the demo recipe, shows the plan card, approves it,
follows the steps as they run and ends with a summary an operator can take
further.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from contracts import JsonObject, RunView
from policies import catalog
from shim.cli.client import Client
from shim.cli.errors import Exit
from shim.cli.follow import FINISHED
from shim.cli.render import short
from shim.local import InventoryService, demo_stack
from shim.stackfile import DEFAULT_VAR

__all__ = ["add_arguments", "run"]


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--dir",
        default=str(DEFAULT_VAR / "demo"),
        help=f"working folder, wiped first (default {DEFAULT_VAR / 'demo'})",
    )
    p.add_argument(
        "--timeout", type=float, default=120, help="seconds to wait for each stage (default 120)"
    )


def run(args: argparse.Namespace) -> int:
    catalog.load_all()  # a bad policy file: one line (exit 1), before anything starts
    with demo_stack(Path(args.dir), _say) as stack:
        return _walk_through(
            api=Client(stack.base_url, stack.submitter),
            approver=Client(stack.base_url, stack.approver),
            base=stack.base_url,
            inventory=stack.inventory,
            db_file=stack.db_file,
            timeout=args.timeout,
        )


def _say(text: str = "") -> None:
    print(text, flush=True)


def _short(output: JsonObject | None) -> str:
    """A step's output on one line: cut at a word with an ellipsis, JSON not Python reprs."""
    if output is None:
        return ""
    if "stdout" in output:
        return short(output["stdout"], 70)
    if "status" in output and "bytes" in output:
        digest = str(output["body_sha256"])[:12]
        return f"HTTP {output['status']}, {output['bytes']} bytes, sha256 {digest}…"
    if "echo" in output:
        return short(output["echo"], 70)
    return short(output, 70)


def _walk_through(
    *,
    api: Client,
    approver: Client,
    base: str,
    inventory: InventoryService,
    db_file: Path,
    timeout: float,
) -> Exit:
    intent: JsonObject = {
        "recipe": "demo-inventory",
        "objective": "Check the demo warehouse inventory",
        "parameters": {"base_url": inventory.base_url},
        "mode": "full-cycle",
    }
    _say("\n1. Submit the intent (POST /intent)")
    accepted = api.submit(intent)
    run_id = accepted.run_id
    _say(f"   run {run_id} queued")

    _say("\n2. The worker compiles the recipe into a plan and gates it")
    view = api.wait(run_id, {"waiting_approval"} | FINISHED, timeout)
    card = view.plan_card
    if view.status.value != "waiting_approval" or card is None:
        _say(f"   the run stopped: {view.error_code}: {view.error_message}")
        return Exit.FAILED
    _say(f"   plan card  digest {card.plan_digest}")
    for i, step in enumerate(card.plan.steps, 1):
        kind = step.driver_kind.value
        _say(f"     {i}. {step.step_id:<9} {kind:<17} {step.title or ''}")
    seen_requests = inventory.count("/inventory.json")
    _say(f"   nothing has run yet: the inventory service saw {seen_requests} request(s)")

    _say("\n3. Approve exactly this plan (POST /approve, naming its digest)")
    approver.decide(run_id, True, card.plan_digest)
    _say("   approved by demo-approver")

    _say("\n4. Execute, step by step")
    seen: set[str] = set()

    def progress(v: RunView) -> None:
        for s in v.steps:
            if s.step_id not in seen:
                seen.add(s.step_id)
                mark = "ok " if s.status == "succeeded" else "ERR"
                _say(f"   [{mark}] {s.step_id:<9} {_short(s.output)}")

    final = api.wait(run_id, FINISHED, timeout, progress)
    ledger = api.ledger(run_id)
    episodes = api.episodes(run_id)
    artifacts = api.artifacts(run_id)

    _say("\n5. Summary")
    _say(f"   run        {run_id}")
    why = f" ({final.error_code})" if final.error_code else ""
    _say(f"   status     {final.status.value}{why}")
    _say(f"   ledger     {len(ledger)} call(s), one row each, keyed by op_key:")
    for c in ledger:
        _say(
            f"     {c.kind:<8} {c.step_id:<9} {c.status:<9}"
            f" op_key {c.op_key[:16]}…  {c.duration_ms} ms"
        )
    _say(
        f"   evidence   {len(episodes)} MOVA episode(s),"
        f" {len(artifacts)} artifact(s) (SHA-256 addressed)"
    )
    for a in artifacts[:6]:
        sha = str(a["sha256"])
        _say(f"     {a['step_id']!s:<9} {a['name']!s:<14} {sha[:16]}…  {a['size_bytes']} bytes")
    _say(f"     {base}/runs/{run_id}/episodes")
    _say(f"     {base}/artifacts/<sha256>")
    if final.status.value == "succeeded":
        before = inventory.count("/inventory.json")
        report = api.replay(run_id)
        verdict = "matches" if report.match else "DIVERGED from"
        _say(
            f"   replay     {report.calls} call(s) served from the ledger; the trace digest"
            f" {verdict} the recorded one"
        )
        _say(
            f"     {report.replayed_trace_digest or '-'}; the inventory service heard"
            f" {inventory.count('/inventory.json') - before} new request(s)"
        )
        if not report.match:
            return Exit.FAILED
    # Text printed for a person to copy, not executed here.
    ledger_q = f"SELECT * FROM v_ledger WHERE run_id = '{run_id}'"  # noqa: S608
    overview_q = f"SELECT * FROM v_run_overview WHERE run_id = '{run_id}';"  # noqa: S608
    _say("\n   An operator would look next with:")
    _say(f'     .venv/bin/gatehouse sql "{ledger_q}" --database-url sqlite:///{db_file}')
    _say(f'     sqlite3 {db_file} "{overview_q}"')
    _say(
        '     (on PostgreSQL: psql -d gatehouse -c "SET search_path = gatehouse;'
        ' SELECT * FROM v_run_overview;")'
    )
    return Exit.OK if final.status.value == "succeeded" else Exit.FAILED
