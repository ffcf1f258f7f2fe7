"""Plans the integration tests submit: noop notes, and a shell echo."""

from __future__ import annotations

from typing import Any

from contracts import Plan, digest_of

__all__ = ["ECHO", "NOTE", "digest_of_plan", "noop_plan"]

NOTE = {"step_id": "n", "verb": "note", "connector_id": "note", "driver_kind": "noop", "input": {}}
ECHO = {
    "step_id": "e",
    "verb": "run",
    "connector_id": "workspace-shell",
    "driver_kind": "restricted_shell",
    "input": {"argv": ["echo", "hello"]},
}


def noop_plan(steps: int, objective: str = "noop") -> dict[str, Any]:
    """``steps`` noop notes ``s1``, ``s2``…, each echoing its number."""
    return {
        "objective": objective,
        "steps": [{**NOTE, "step_id": f"s{n}", "input": {"n": n}} for n in range(1, steps + 1)],
    }


def digest_of_plan(plan: dict[str, Any]) -> str:
    """The digest an approval of ``plan`` names."""
    return digest_of(Plan.model_validate(plan).model_dump(mode="json"))
