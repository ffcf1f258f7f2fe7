"""``gatehouse workers``: the workers with their heartbeat age, and which are live."""

from __future__ import annotations

import argparse

from shim.cli.errors import Exit
from shim.cli.options import api_options, connect
from shim.cli.output import rows, show
from shim.cli.render import records

__all__ = ["add_arguments", "run"]


def add_arguments(p: argparse.ArgumentParser) -> None:
    api_options(p)


def run(args: argparse.Namespace) -> int:
    with connect(args) as api:
        raw = api.get_json("/workers")
    listed = rows(raw, "workers")
    for r in listed:
        r["heartbeat"] = f"{r.get('heartbeat_age_s')} s ago"
        planners = r.get("planners")
        r["planners"] = ", ".join(map(str, planners)) if isinstance(planners, list) else "?"
    cols = ["executor_id", "live", "heartbeat", "planners", "app_version", "hostname", "pid"]
    cols += ["stopped_at", "reaped_at"]
    table = records("Workers", cols, listed)
    if isinstance(raw, dict):
        table.caption = (
            f"live: a heartbeat within {raw.get('dead_after_s')} s, not stopped (stopped_at:"
            " it stopped cleanly) nor handed over (reaped_at); runs are enqueued"
            f" for version {raw.get('app_version')}"
        )
    versions = rows(raw, "versions")
    for v in versions:
        v["unfinished"] = int(str(v.get("pending", 0))) + int(str(v.get("enqueued", 0)))
    cols = ["app_version", "current", "unfinished", "pending", "enqueued", "live_workers"]
    by_version = records("Runs by application version", [*cols, "served"], versions)
    said = raw.get("warnings") if isinstance(raw, dict) else None
    if isinstance(said, list) and said:
        by_version.caption = "\n".join(map(str, said))
    show(args, raw, table, by_version)
    return Exit.OK
