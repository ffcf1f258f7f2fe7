"""No text channel leaks into another in API responses.

Three markers are planted, one per channel: a person's objective (human_ui), a
tool's output (system_log: the inventory service's item names), and the
profile's planner instruction (model_instruction). Every response is walked; each
marker may only appear at places its response tags with its own channel.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

from contracts import JsonValue, Plan, digest_of
from policies import catalog
from shim.local import INVENTORY, InventoryService
from tests.support.stack import Stack


def _leaves(value: JsonValue, pointer: str = "") -> Iterator[tuple[str, str]]:
    if isinstance(value, dict):
        for key, inner in value.items():
            if pointer == "" and key == "text_channels":
                continue
            yield from _leaves(inner, f"{pointer}/{key}")
    elif isinstance(value, list):
        for i, inner in enumerate(value):
            yield from _leaves(inner, f"{pointer}/{i}")
    elif isinstance(value, str):
        yield pointer, value


def channel_of(pointer: str, channels: dict[str, str]) -> str | None:
    """The channel of the longest pattern that is a prefix of ``pointer``."""
    parts = pointer.split("/")[1:]
    best: tuple[int, str | None] = (-1, None)
    for pattern, channel in channels.items():
        pat = pattern.split("/")[1:]
        if len(pat) <= len(parts) and all(p in ("*", q) for p, q in zip(pat, parts, strict=False)):
            best = max(best, (len(pat), channel), key=lambda b: b[0])
    return best[1]


def test_no_channel_leaks(stack: Stack) -> None:
    human = f"objective-{uuid.uuid4().hex[:8]}"
    tool = str(INVENTORY["items"][0]["name"])  # type: ignore[index]  # a literal fixture
    instruction = catalog.profile("default").model.planner_instruction
    with InventoryService() as inventory:
        plan = {
            "objective": human,
            "steps": [
                {
                    "step_id": "fetch",
                    "verb": "fetch",
                    "connector_id": "local-http",
                    "driver_kind": "http",
                    "title": f"title for {human}",
                    "input": {"url": f"{inventory.base_url}/inventory.json"},
                }
            ],
        }
        body = {"recipe": "echo", "objective": human, "mode": "run-plan", "plan": plan}
        run_id = stack.submit(body).json()["run_id"]
        digest = digest_of(Plan.model_validate(plan).model_dump(mode="json"))
        r = stack.client.post(
            f"/approve/{run_id}", json={"plan_digest": digest, "comment": f"ok {human}"}
        )
        assert r.status_code == 200, r.text
        assert stack.wait(run_id, {"succeeded", "failed"})["status"] == "succeeded"

    olga = stack.auth("olga")
    responses: dict[str, Any] = {
        "run": stack.client.get(f"/runs/{run_id}", headers=olga).json(),
        "episodes": stack.client.get(f"/runs/{run_id}/episodes", headers=olga).json(),
        "security": stack.client.get("/security-events", headers=olga).json(),
        "policy": stack.client.get("/policies/default", headers=olga).json()["profile"],
    }
    seen = {"human_ui": 0, "system_log": 0, "model_instruction": 0}
    for name, response in responses.items():
        channels = response["text_channels"]
        for pointer, text in _leaves(response):
            where = channel_of(pointer, channels)
            for marker, channel in (
                (human, "human_ui"),
                (tool, "system_log"),
                (instruction, "model_instruction"),
            ):
                if marker in text:
                    assert where == channel, f"{name}{pointer}: {channel} text tagged {where}"
                    seen[channel] += 1
    # each marker was really found somewhere, so the walk is not vacuous
    assert all(n > 0 for n in seen.values()), seen


def test_channel_of() -> None:
    channels = {"/steps/*/output": "system_log", "/objective": "human_ui"}
    assert channel_of("/steps/3/output/json/items/0/name", channels) == "system_log"
    assert channel_of("/objective", channels) == "human_ui"
    assert channel_of("/run_id", channels) is None
