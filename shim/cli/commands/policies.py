"""``gatehouse policies``: the policy profiles and tool pools with their digests, or one in full."""

from __future__ import annotations

import argparse

from shim.cli.errors import Exit
from shim.cli.options import api_options, connect
from shim.cli.output import rows, show, write_json
from shim.cli.render import console, fields, records

__all__ = ["add_arguments", "run"]


def add_arguments(p: argparse.ArgumentParser) -> None:
    api_options(p)
    p.add_argument("policy_id", nargs="?", help="show this profile or tool pool in full")


def run(args: argparse.Namespace) -> int:
    with connect(args) as api:
        raw = api.get_json(f"/policies/{args.policy_id}" if args.policy_id else "/policies")
    if args.policy_id:
        if args.json or not isinstance(raw, dict):
            write_json(raw)
            return Exit.OK
        out = console()
        for kind in ("profile", "tool_pool"):
            found = raw.get(kind)
            if isinstance(found, dict):
                out.print(fields(f"{kind} {args.policy_id}", {"digest": found.get("digest")}))
                out.print_json(data=found.get("content"))
        return Exit.OK
    tables = []
    for key, id_key in (("profiles", "profile_id"), ("tool_pools", "tool_pool_id")):
        listed = []
        for r in rows(raw, key):
            content = r.get("content")
            name = content.get(id_key) if isinstance(content, dict) else None
            listed.append({"id": name, "digest": r.get("digest")})
        title = key.replace("_", " ").capitalize()
        tables.append(records(title, ["id", "digest"], listed, limit=64))
    show(args, raw, *tables)
    return Exit.OK
