"""Pin, or check the pins of, the MCP tools in a tool pool file.

    python -m worker.mcp_pin POOL.json            # check: exit 1 if any pin is stale
    python -m worker.mcp_pin POOL.json --write    # fetch the definitions and pin them

For every ``mcp_proxy`` connector the server is started (stdio, in the sandbox
when this machine has one) or reached (streamable HTTP, under the destination
rules), its tool list fetched, and each allowed tool's name, description and
input schema written into the file with their digest. The pins live in the tool
pool file itself, so the shim (which gates arguments against the pinned schema)
and every worker (which refuses a call whose live definition differs) read the
same pins, and the pool's digest, recorded with each run, covers them. A tool
the server does not offer cannot be pinned and stops ``--write``.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from contracts import Connector, GatehouseError, JsonObject, JsonValue
from worker.handlers.mcp_proxy import list_live_tools
from worker.sandbox import Sandbox
from worker.sandbox.bwrap import current as current_sandbox

__all__ = ["main", "pin_pool"]


def pin_pool(
    pool: JsonObject, sandbox: Sandbox | None, workdir: Path
) -> tuple[JsonObject, list[str]]:
    """The pool with every allowed MCP tool pinned as the server describes it now,
    and what differed from the pins it had (empty: every pin held)."""
    problems: list[str] = []
    connectors = pool.get("connectors")
    out: list[JsonValue] = []
    for raw in connectors if isinstance(connectors, list) else []:
        server = raw.get("mcp") if isinstance(raw, dict) else None
        if not isinstance(raw, dict) or not isinstance(server, dict):  # no MCP server
            out.append(raw)
            continue
        tools = server.get("tools")
        old = {
            str(t["name"]): t
            for t in (tools if isinstance(tools, list) else [])
            if isinstance(t, dict) and isinstance(t.get("name"), str)
        }
        bare = Connector.model_validate(
            {**raw, "mcp": {**server, "tools": [], "read_only_tools": []}}
        )
        folder = workdir / bare.connector_id
        folder.mkdir(parents=True, exist_ok=True)
        live = {t.name: t for t in list_live_tools(bare, folder, sandbox)}
        pinned: list[JsonValue] = []
        for name, before in old.items():
            now = live.get(str(name))
            if now is None:
                problems.append(f"{bare.connector_id}: the server offers no tool {name!r}")
                continue
            was = before.get("digest")
            if was is None:
                problems.append(
                    f"{bare.connector_id}: tool {name!r} is {now.digest[:12]}, not pinned yet"
                )
            elif was != now.digest:
                problems.append(
                    f"{bare.connector_id}: tool {name!r} is {now.digest[:12]}, pinned"
                    f" {str(was)[:12]}"
                )
            pinned.append(now.as_pin())
        out.append({**raw, "mcp": {**server, "tools": pinned}})
    return {**pool, "connectors": out}, problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m worker.mcp_pin", description=__doc__)
    parser.add_argument("pool", type=Path, help="a tool pool JSON file")
    parser.add_argument("--write", action="store_true", help="write the fresh pins to the file")
    args = parser.parse_args(argv)
    pool: JsonObject = json.loads(args.pool.read_text(encoding="utf-8"))
    found = current_sandbox()
    sandbox = None if isinstance(found, str) else found
    try:
        with tempfile.TemporaryDirectory(prefix="gh-mcp-pin-") as tmp:
            fresh, problems = pin_pool(pool, sandbox, Path(tmp))
    except GatehouseError as exc:
        print(f"mcp_pin: {exc.code.value}: {exc.message}", file=sys.stderr)
        return 2
    for problem in problems:
        print(problem)
    if args.write and any("offers no tool" in p for p in problems):
        print("mcp_pin: not written: a tool to pin is not offered", file=sys.stderr)
        return 1
    if args.write:
        args.pool.write_text(json.dumps(fresh, indent=2, ensure_ascii=False) + "\n", "utf-8")
        print(f"pinned {args.pool}")
        return 0
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
