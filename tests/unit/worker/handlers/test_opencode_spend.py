"""What an OpenCode turn spent, and the watch's word on whether it is past the run's allowance."""

from __future__ import annotations

from typing import Any

from contracts import JsonObject, Price
from contracts.execution import TurnAllowance
from worker.handlers.opencode.spend import overspent, usage_of


def _info(tokens: Any) -> dict[str, Any]:
    return {"role": "assistant", "tokens": tokens}


def test_usage_sums_every_reply_with_cache_and_reasoning() -> None:
    replies = {
        "msg_1": _info({"input": 100, "output": 20, "reasoning": 5, "cache": {"read": 7}}),
        "msg_2": _info({"input": 50, "output": 10, "cache": {"read": 1, "write": 2}}),
        "msg_3": _info(None),  # still streaming: no tokens yet
        "msg_4": _info({"input": -4, "output": True}),  # nonsense counts as nothing
    }
    assert usage_of(replies, "m") == {"model": "m", "prompt_tokens": 160, "completion_tokens": 35}


def test_each_budget_cuts_a_turn_only_once_spent_past() -> None:
    usage: JsonObject = {"model": "m", "prompt_tokens": 600, "completion_tokens": 300}
    assert overspent(None, usage, 1e9) is None  # no allowance: no cut (compile turns)
    assert overspent(TurnAllowance(tokens=900), usage, 0) is None  # exactly what was left
    assert overspent(TurnAllowance(tokens=899), usage, 0) == (
        "max_tokens: the turn used 900 tokens; the run had 899 left"
    )
    priced = {"m": Price(prompt_per_mtok=2.0, completion_per_mtok=10.0)}  # $0.0042
    assert overspent(TurnAllowance(cost_usd=0.0042, prices=priced), usage, 0) is None
    assert overspent(TurnAllowance(cost_usd=0.004, prices=priced), usage, 0) == (
        "max_cost_usd: the turn cost $0.0042; the run had $0.0040 left"
    )
    # an unpriced model costs nothing, as the run's account says
    assert overspent(TurnAllowance(cost_usd=0.0), {**usage, "model": "other"}, 0) is None
    assert overspent(TurnAllowance(wall_s=2.0), usage, 2.0) is None
    assert overspent(TurnAllowance(wall_s=2.0), usage, 2.5) == (
        "max_wall_s: the turn ran 2.5 s; the run had 2.0 s left"
    )
