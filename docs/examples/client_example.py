"""Submit a plan, approve it as a second person, wait for it, read its ledger —
with ``shim.client``, the Python client that ships with Gatehouse.

    GATEHOUSE_URL=http://127.0.0.1:8000 \\
    GATEHOUSE_TOKEN=<local-submitter's token> GATEHOUSE_APPROVER_TOKEN=<local-approver's> \\
    python docs/examples/client_example.py

``gatehouse up`` writes both to var/local-tokens.txt (each also an operator,
who may read the ledger). The second half
does the same with the asyncio client and follows the run's event stream.
"""

from __future__ import annotations

import asyncio
import os

from contracts import JsonObject
from shim.client import ApiError, AsyncClient, Client, ErrorCode

URL = os.environ.get("GATEHOUSE_URL", "http://127.0.0.1:8000")
SUBMITTER = os.environ["GATEHOUSE_TOKEN"]
APPROVER = os.environ["GATEHOUSE_APPROVER_TOKEN"]

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
    with Client(URL, SUBMITTER, retry_for=60) as me, Client(URL, APPROVER) as boss:
        accepted = me.submit(INTENT, idempotency_key="client-example-1")
        run_id = accepted.run_id
        card = me.wait(run_id, {"waiting_approval"}, timeout=60)
        print(f"{run_id}: {card.status.value}, plan digest {card.plan_digest}")
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
    async with AsyncClient(URL, SUBMITTER) as me, AsyncClient(URL, APPROVER) as boss:
        accepted = await me.submit(INTENT, idempotency_key="client-example-2")
        card = await me.wait(accepted.run_id, {"waiting_approval"}, timeout=60)
        await boss.approve(accepted.run_id, card.plan_digest or "")
        kinds = [event.kind async for event in me.events(accepted.run_id)]
        finished = kinds.count("step.finished")
        print(f"{accepted.run_id}: {kinds[0]} first, then {finished} steps finished")


if __name__ == "__main__":
    blocking()
    asyncio.run(streaming())
