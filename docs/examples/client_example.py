"""Submit a plan, approve it as a second person, wait for it, read its ledger —
with ``shim.client``, the Python client that ships with Gatehouse.

In the folder where ``gatehouse up`` runs (a second terminal)::

    .venv/bin/python docs/examples/client_example.py

It finds the shim as the CLI does (``GATEHOUSE_URL``, else ``var/stack.json``) and
takes the two people ``gatehouse up`` made from ``var/local-tokens.txt`` (each also an
operator, who may read the ledger), or from ``GATEHOUSE_TOKEN`` and
``GATEHOUSE_APPROVER_TOKEN``. Run it as often as you like: each run of it submits
runs of its own. The second half does the same with the asyncio client and follows
the run's event stream.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from pathlib import Path

from contracts import JsonObject
from shim.client import ApiError, AsyncClient, Client, ErrorCode


def _token(variable: str, person: str) -> str:
    """The token in ``variable``, else ``person``'s in the file ``gatehouse up`` keeps."""
    given = os.environ.get(variable)
    if given:
        return given
    kept = Path("var/local-tokens.txt")
    lines = kept.read_text(encoding="utf-8").splitlines() if kept.exists() else []
    for name, token in (line.split(maxsplit=1) for line in lines if line.strip()):
        if name == person:
            return token.strip()
    raise SystemExit(f"set {variable}, or run this where `gatehouse up` keeps {kept}")


SUBMITTER = _token("GATEHOUSE_TOKEN", "local-submitter")
APPROVER = _token("GATEHOUSE_APPROVER_TOKEN", "local-approver")
# One key per run of this program: the key names one intent, and sent again it
# answers the run it made instead of making a second one.
KEY = f"client-example-{uuid.uuid4().hex[:12]}"

# A plan you write yourself (mode run-plan): two steps through the noop handler.
PLAN: JsonObject = {
    "objective": "say hello twice",
    "steps": [
        {"step_id": f"s{n}", "verb": "note", "connector_id": "note", "driver_kind": "noop",
         "input": {"n": n}}
        for n in (1, 2)
    ],
}  # fmt: skip
INTENT: JsonObject = {
    "recipe": "echo", "objective": "say hello twice", "mode": "run-plan", "plan": PLAN,
}  # fmt: skip


def blocking() -> str:
    with Client.from_env(SUBMITTER, retry_for=60) as me, Client.from_env(APPROVER) as boss:
        accepted = me.submit(INTENT, idempotency_key=f"{KEY}-1")
        run_id = accepted.run_id
        card = me.wait(run_id, {"waiting_approval"}, timeout=60)
        print(f"{run_id}: {card.status.value}, plan digest {card.plan_digest}")
        again = me.submit(INTENT, idempotency_key=f"{KEY}-1")  # a retry of our own
        assert again.run_id == run_id
        print(f"{run_id}: sent again with its key, the same run")
        try:
            me.approve(run_id, card.plan_digest or "")
        except ApiError as refused:  # a submitter may not decide
            assert refused.error_code is ErrorCode.FORBIDDEN
            print(f"as the submitter: {refused.code} (HTTP {refused.status})")
        decided = boss.approve(run_id, card.plan_digest or "", comment="looks right")
        print(f"{decided.decided_by} {decided.decision.value} it")
        done = me.wait(run_id, {"succeeded", "failed"}, timeout=120)
        print(f"{run_id}: {done.status.value}, {len(done.steps)} steps")
        for call in me.ledger(run_id):
            print(f"  ledger: {call.step_id} {call.status}")
        report = me.verify_ledger(run_id)
        assert isinstance(report, dict)
        print(f"  verify: ok={report['ok']}, {report['entries']} entries chained")
        return run_id


async def streaming() -> None:
    async with AsyncClient.from_env(SUBMITTER) as me, AsyncClient.from_env(APPROVER) as boss:
        accepted = await me.submit(INTENT, idempotency_key=f"{KEY}-2")
        card = await me.wait(accepted.run_id, {"waiting_approval"}, timeout=60)
        await boss.approve(accepted.run_id, card.plan_digest or "")
        kinds = [event.kind async for event in me.events(accepted.run_id)]
        finished = kinds.count("step.finished")
        print(f"{accepted.run_id}: {kinds[0]} first, then {finished} steps finished")


if __name__ == "__main__":
    blocking()
    asyncio.run(streaming())
