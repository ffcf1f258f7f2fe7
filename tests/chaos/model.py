"""The independent model: what the plans the harness approved should have produced.

The harness writes every plan itself, so it knows, without asking Gatehouse,
which effects an approved run must apply: one per step, each carrying an
``effect_id`` the harness chose. A rejected or never-approved run must apply
none. Nothing here reads Gatehouse's database.

Channels, by the connector a step uses (tool pool ``default``):

* ``keyed`` — ``local-http`` to the sink's ``/keyed/effect``; the op_key goes
  as ``Idempotency-Key`` and the sink de-duplicates on it.
* ``unkeyed`` — ``local-http-unkeyed`` to ``/unkeyed/effect``; no key, every
  request the sink receives is applied.
* ``shell`` — ``workspace-shell`` runs ``echo EFFECT_ID``; not idempotent, so an
  interrupted call is in doubt. It touches nothing outside the run, so its
  effect is observed as the completed ledger call whose stdout is the id.
* ``note`` — ``note`` (noop) echoes ``{"effect_id": ...}``; observed the same way.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from enum import StrEnum

from contracts import JsonObject, Plan, digest_of
from tests.chaos.sink import KEYED_PATH, UNKEYED_PATH

__all__ = [
    "NON_IDEMPOTENT",
    "Channel",
    "Effect",
    "PlannedRun",
    "make_plan",
    "random_channels",
]


class Channel(StrEnum):
    KEYED = "keyed"
    UNKEYED = "unkeyed"
    SHELL = "shell"
    NOTE = "note"


# Channels whose interrupted calls must be flagged in doubt, never sent again.
NON_IDEMPOTENT = frozenset({Channel.UNKEYED, Channel.SHELL})

# The first step of each channel in a plan has exactly this id, so a crash
# point ``<point>:<step_id>`` names one handler in every plan.
STEP_ID = {
    Channel.KEYED: "keyed",
    Channel.UNKEYED: "unkeyed",
    Channel.SHELL: "shell",
    Channel.NOTE: "note",
}
DRIVER = {
    Channel.KEYED: "http",
    Channel.UNKEYED: "http",
    Channel.SHELL: "restricted_shell",
    Channel.NOTE: "noop",
}


@dataclass(frozen=True)
class Effect:
    effect_id: str
    channel: Channel
    tag: str  # the planned run it belongs to
    step_id: str


@dataclass(frozen=True)
class PlannedRun:
    tag: str
    plan: JsonObject
    digest: str  # what an approval must name
    effects: tuple[Effect, ...]

    def effect_of_step(self, step_id: str) -> Effect | None:
        for effect in self.effects:
            if effect.step_id == step_id:
                return effect
        return None


def _step(channel: Channel, step_id: str, effect_id: str, sink_url: str) -> JsonObject:
    if channel in (Channel.KEYED, Channel.UNKEYED):
        keyed = channel is Channel.KEYED
        return {
            "step_id": step_id,
            "verb": "write",
            "connector_id": "local-http" if keyed else "local-http-unkeyed",
            "driver_kind": "http",
            "input": {
                "method": "POST",
                "url": sink_url + (KEYED_PATH if keyed else UNKEYED_PATH),
                "json": {"effect_id": effect_id},
            },
        }
    if channel is Channel.SHELL:
        return {
            "step_id": step_id,
            "verb": "run",
            "connector_id": "workspace-shell",
            "driver_kind": "restricted_shell",
            "input": {"argv": ["echo", effect_id]},
        }
    return {
        "step_id": step_id,
        "verb": "note",
        "connector_id": "note",
        "driver_kind": "noop",
        "input": {"effect_id": effect_id},
    }


def make_plan(tag: str, sink_url: str, channels: list[Channel]) -> PlannedRun:
    """A run-plan plan with one step per channel, in order; its effects; its digest."""
    steps: list[JsonObject] = []
    effects: list[Effect] = []
    seen: dict[Channel, int] = {}
    for channel in channels:
        seen[channel] = seen.get(channel, 0) + 1
        n = seen[channel]
        step_id = STEP_ID[channel] if n == 1 else f"{STEP_ID[channel]}-{n}"
        effect_id = f"{tag}.{step_id}"
        steps.append(_step(channel, step_id, effect_id, sink_url))
        effects.append(Effect(effect_id=effect_id, channel=channel, tag=tag, step_id=step_id))
    plan: JsonObject = {"objective": f"chaos run {tag}", "steps": list(steps)}
    digest = digest_of(Plan.model_validate(plan).model_dump(mode="json"))
    return PlannedRun(tag=tag, plan=plan, digest=digest, effects=tuple(effects))


def random_channels(
    rng: random.Random, available: list[Channel], low: int, high: int
) -> list[Channel]:
    """Between ``low`` and ``high`` steps, each channel at least once when there is room."""
    count = rng.randint(low, high)
    picked = list(available)[:count]
    while len(picked) < count:
        picked.append(rng.choice(available))
    rng.shuffle(picked)
    return picked
