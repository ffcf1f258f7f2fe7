"""``gatehouse security-events``: refused requests and refusals inside runs, newest first."""

from __future__ import annotations

import argparse

from contracts import JsonValue
from shim.cli.errors import Exit
from shim.cli.options import api_options, connect
from shim.cli.output import rows, show
from shim.cli.render import records

__all__ = ["add_arguments", "run"]

_COLUMNS = [
    "recorded_at",
    "last_seen_at",
    "repeat_count",
    "security_event_type",
    "security_event_category",
    "severity",
    "episode_id",
]


def add_arguments(p: argparse.ArgumentParser) -> None:
    api_options(p)
    p.add_argument("--limit", type=int, default=100, help="at most this many (default 100)")


def run(args: argparse.Namespace) -> int:
    with connect(args) as api:
        raw = api.get_json("/security-events", {"limit": str(args.limit)})
    show(args, raw, records("Security events", _COLUMNS, _flat(rows(raw, "security_events"))))
    return Exit.OK


def _flat(events: list[dict[str, JsonValue]]) -> list[dict[str, JsonValue]]:
    """Each episode with its row's facts (``result_details``: repeat_count,
    last_seen_at) beside its own fields, for the table."""
    out: list[dict[str, JsonValue]] = []
    for event in events:
        details = event.get("result_details")
        out.append({**event, **details} if isinstance(details, dict) else event)
    return out
