"""What one OpenCode turn has spent, and whether that is past what the run has left.

OpenCode reports usage per assistant message (``tokens``: input, output,
reasoning, cache read/write); a turn's usage is their sum, in the shape the
run's budgets count (``{model, prompt_tokens, completion_tokens}``): prompt
tokens include the cache's, completion tokens the reasoning. A build turn's
envelope carries the run's allowance (what is left of its token, cost and
wall-time budgets); the watch stops the turn as soon as it spends past it.
"""

from __future__ import annotations

from contracts import JsonObject, JsonValue
from contracts.execution import TurnAllowance

__all__ = ["overspent", "usage_of"]


def _count(value: JsonValue) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def usage_of(replies: dict[str, JsonObject], model: str) -> JsonObject:
    """The summed usage of a turn's assistant messages (by message id)."""
    prompt = completion = 0
    for info in replies.values():
        tokens = info.get("tokens")
        if not isinstance(tokens, dict):
            continue
        cache = tokens.get("cache")
        if isinstance(cache, dict):
            prompt += _count(cache.get("read")) + _count(cache.get("write"))
        prompt += _count(tokens.get("input"))
        completion += _count(tokens.get("output")) + _count(tokens.get("reasoning"))
    return {"model": model, "prompt_tokens": prompt, "completion_tokens": completion}


def overspent(left: TurnAllowance | None, usage: JsonObject, elapsed_s: float) -> str | None:
    """The budget a turn has spent past, said for people; None while it has not."""
    if left is None:
        return None
    prompt, completion = _count(usage.get("prompt_tokens")), _count(usage.get("completion_tokens"))
    if left.tokens is not None and prompt + completion > left.tokens:
        return (
            f"max_tokens: the turn used {prompt + completion:,} tokens;"
            f" the run had {left.tokens:,} left"
        )
    model = usage.get("model")
    price = left.prices.get(model) if isinstance(model, str) else None
    if left.cost_usd is not None and price is not None:
        cost = price.cost(prompt, completion)
        if cost > left.cost_usd:
            return (
                f"max_cost_usd: the turn cost ${cost:,.4f}; the run had ${left.cost_usd:,.4f} left"
            )
    if left.wall_s is not None and elapsed_s > left.wall_s:
        return f"max_wall_s: the turn ran {elapsed_s:,.1f} s; the run had {left.wall_s:,.1f} s left"
    return None
