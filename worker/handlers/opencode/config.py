"""The configuration a supervised OpenCode server starts with.

Passed as JSON in ``OPENCODE_CONFIG_CONTENT``. One custom OpenAI-compatible
provider (``gatehouse``) points at the configured model; every permission
class is set explicitly from the policy (never an implicit ``ask``), and
``task``, the tool that makes child sessions, is denied.
"""

from __future__ import annotations

from contracts import JsonObject, OpencodePolicy

__all__ = ["PROVIDER_ID", "server_config"]

PROVIDER_ID = "gatehouse"


def server_config(
    model_url: str, model: str, api_key: str | None, policy: OpencodePolicy
) -> JsonObject:
    permission: JsonObject = dict(policy.permissions)  # task is "deny": the model insists
    return {
        "$schema": "https://opencode.ai/config.json",
        "provider": {
            PROVIDER_ID: {
                "npm": "@ai-sdk/openai-compatible",
                "name": "Gatehouse model",
                "options": {"baseURL": model_url, "apiKey": api_key or "unused"},
                "models": {model: {"name": model}},
            }
        },
        "model": f"{PROVIDER_ID}/{model}",
        "small_model": f"{PROVIDER_ID}/{model}",
        "autoupdate": False,
        "share": "disabled",
        "snapshot": True,
        "permission": permission,
    }
