"""The catalog as served: the recipes one may submit, the policy profiles and tool pools.

Each policy file is served with its SHA-256 (what a run records it ran under)
and which of its text is for models (``planner_instruction``), never for people.
"""

from __future__ import annotations

from pydantic import BaseModel

from contracts import POLICY_CHANNELS, ErrorCode, GatehouseError, JsonObject, JsonValue
from policies import catalog

__all__ = ["policies", "policy", "recipes"]


def _policy(model: BaseModel, digest: str) -> JsonValue:
    """A policy file as served: its content, its SHA-256, and which text is for models."""
    body: JsonValue = {
        "digest": digest,
        "content": model.model_dump(mode="json"),
        # planner_instruction is guardrail text for planners, never text for people.
        "text_channels": {k: v.value for k, v in POLICY_CHANNELS.items()},
    }
    return body


def recipes() -> JsonObject:
    return {
        "recipes": [
            {
                "recipe_id": r.model.recipe_id,
                "title": r.model.title,
                "planner": r.model.planner,
                "parameters_schema": r.model.parameters_schema,
                "digest": r.digest,
            }
            for r in catalog.list_recipes()
        ]
    }


def policies() -> JsonObject:
    return {
        "profiles": [_policy(p.model, p.digest) for p in catalog.list_profiles()],
        "tool_pools": [_policy(t.model, t.digest) for t in catalog.list_tool_pools()],
    }


def policy(policy_id: str) -> JsonObject:
    """The profile and the tool pool named ``policy_id`` (either may be None, not both)."""
    profiles = [p for p in catalog.list_profiles() if p.model.profile_id == policy_id]
    pools = [t for t in catalog.list_tool_pools() if t.model.tool_pool_id == policy_id]
    if not profiles and not pools:
        raise GatehouseError(ErrorCode.NOT_FOUND, f"no profile or tool pool {policy_id!r}")
    return {
        "policy_id": policy_id,
        "profile": _policy(profiles[0].model, profiles[0].digest) if profiles else None,
        "tool_pool": _policy(pools[0].model, pools[0].digest) if pools else None,
    }
