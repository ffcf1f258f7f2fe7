"""The ``gatehouse`` command. Each subcommand parses, makes one call, prints.

Process commands (demo, up, shim, worker, migrate) start or set up
processes; the rest talk to a running shim over HTTP (``--url`` or
``GATEHOUSE_URL``, default http://127.0.0.1:8000).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from pydantic import JsonValue

from ledger import DEFAULT_DATABASE_URL

__all__ = ["COMMANDS", "build_parser", "main"]

DEFAULT_URL = "http://127.0.0.1:8000"
DEFAULT_DB = DEFAULT_DATABASE_URL

COMMANDS = {
    "demo": "run one real intent end to end on SQLite and explain each stage",
    "up": "start the shim and workers as supervised processes",
    "shim": "run the HTTP API in the foreground",
    "worker": "run one worker in the foreground",
    "migrate": "create or upgrade the database schema",
    "submit": "submit an intent",
    "runs": "list runs, or fork one: runs fork RUN_ID --from-step N",
    "show": "show one run as JSON",
    "approve": "approve a run's plan (by its digest)",
    "reject": "reject a run's plan (by its digest)",
    "cancel": "cancel a run: a waiting run ends cancelled, a running one at its next step",
    "sql": "run a read-only SQL query against the database",
    "tokens": "create a bearer token for an identity (stores only its digest)",
    "ledger": "verify a run's ledger hash chain and name the first broken entry",
    "replay": "replay a finished run from its ledger (no outbound calls); compare trace digests",
    "calls": "resolve an in-doubt call: calls resolve OP_KEY --applied or --not-applied",
    "explain": "a model's report on a finished run, written from its evidence only",
    "opa": "OPA archives: validate one without running it (opa inspect FILE), run one"
    " (opa run FILE), send an interactive run its next message (opa reply RUN_ID TEXT, or"
    " --end), download a run's output archive (opa output RUN_ID), and manage the"
    " signers' trust store (opa trust add|list|remove)",
}
_API_COMMANDS = (
    "submit",
    "runs",
    "show",
    "approve",
    "reject",
    "cancel",
    "ledger",
    "replay",
    "calls",
    "explain",
)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="gatehouse", description="A durable control plane for AI agent runs."
    )
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def add(name: str) -> argparse.ArgumentParser:
        return sub.add_parser(name, help=COMMANDS[name], description=COMMANDS[name])

    d = add("demo")
    d.add_argument(
        "--dir", default="var/demo", help="working folder, wiped first (default var/demo)"
    )
    d.add_argument("--timeout", type=float, default=120, help="seconds to wait for each stage")
    u = add("up")
    u.add_argument("--database-url", default=os.environ.get("GATEHOUSE_DATABASE_URL", DEFAULT_DB))
    u.add_argument("--port", type=int, default=8000)
    u.add_argument("--workers", type=int, default=1, help="worker processes (default 1)")
    u.add_argument("--var", default="var", help="folder for logs and workspaces (default var)")
    s = add("shim")
    s.add_argument("--host", default="127.0.0.1")
    s.add_argument("--port", type=int, default=8000)
    add("worker")
    m = add("migrate")
    m.add_argument("--database-url", default=os.environ.get("GATEHOUSE_DATABASE_URL", DEFAULT_DB))
    for name in _API_COMMANDS:
        add(name)
    url_default = os.environ.get("GATEHOUSE_URL", DEFAULT_URL)
    for name in _API_COMMANDS:
        sub.choices[name].add_argument("--url", default=url_default, help="the shim's base URL")
        sub.choices[name].add_argument(
            "--token",
            default=os.environ.get("GATEHOUSE_TOKEN"),
            help="bearer token (default: GATEHOUSE_TOKEN)",
        )
    sm = sub.choices["submit"]
    sm.add_argument("--recipe", required=True)
    sm.add_argument("--objective", required=True)
    sm.add_argument("--param", action="append", default=[], metavar="KEY=JSON_OR_TEXT")
    sm.add_argument("--mode", default="full-cycle", choices=["plan-only", "run-plan", "full-cycle"])
    sm.add_argument("--plan", help="file with a plan (mode run-plan)")
    sm.add_argument("--idempotency-key")
    r = sub.choices["runs"]
    r.add_argument("action", nargs="?", choices=["list", "fork"], default="list")
    r.add_argument("run_id", nargs="?", help="the run to fork")
    r.add_argument("--status", help="list only runs in this status")
    r.add_argument("--from-step", type=int, help="fork: the plan step (1-based) to go live from")
    sub.choices["replay"].add_argument("run_id")
    e = sub.choices["explain"]
    e.add_argument("run_id")
    e.add_argument("--json", action="store_true", help="print the whole answer as JSON")
    c = sub.choices["calls"]
    c.add_argument("action", choices=["resolve"])
    c.add_argument("op_key")
    outcome = c.add_mutually_exclusive_group(required=True)
    outcome.add_argument("--applied", action="store_true", help="the call did take effect")
    outcome.add_argument("--not-applied", action="store_true", help="it did not: send it again")
    c.add_argument("--note", help="why you decided so (kept in the episode)")
    sub.choices["show"].add_argument("run_id")
    sub.choices["cancel"].add_argument("run_id")
    sub.choices["cancel"].add_argument("--reason", help="why (kept in the episode)")
    sub.choices["ledger"].add_argument("action", choices=["verify"])
    sub.choices["ledger"].add_argument("run_id")
    for name in ("approve", "reject"):
        c = sub.choices[name]
        c.add_argument("run_id")
        c.add_argument("--digest", help="the plan digest decided on (default: the plan card's)")
        c.add_argument("--comment")
    t = add("tokens")
    t.add_argument("action", choices=["add"])
    t.add_argument("identity", help="who the token stands for, e.g. alice")
    t.add_argument("--roles", required=True, help="comma-separated: submitter, approver, operator")
    t.add_argument(
        "--file",
        default=os.environ.get("GATEHOUSE_TOKENS_FILE", "var/tokens.json"),
        help="the tokens file (default: GATEHOUSE_TOKENS_FILE or var/tokens.json)",
    )
    from shim._opa_cli import add_opa_parser  # the OPA archive commands: one block

    add_opa_parser(add("opa"))
    q = add("sql")
    q.add_argument("query")
    q.add_argument("--database-url", default=os.environ.get("GATEHOUSE_DATABASE_URL", DEFAULT_DB))
    return p


def _param(text: str) -> tuple[str, JsonValue]:
    key, _, raw = text.partition("=")
    try:
        return key, json.loads(raw)
    except json.JSONDecodeError:
        return key, raw


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    sys.exit(_dispatch(args))


def _dispatch(args: argparse.Namespace) -> int:
    cmd = args.command
    if cmd == "demo":
        from shim._demo import run_demo

        return run_demo(Path(args.dir), args.timeout)
    if cmd == "up":
        from shim._up import run_up

        return run_up(args.database_url, args.port, args.workers, Path(args.var))
    if cmd == "shim":
        import uvicorn

        uvicorn.run("shim.asgi:app", host=args.host, port=args.port)
        return 0
    if cmd == "worker":
        # The shim never imports worker code: the worker is its own program.
        os.execv(sys.executable, [sys.executable, "-m", "worker"])  # noqa: S606  (fixed argv, no shell)
    if cmd == "migrate":
        from dbos import DBOS

        from ledger import migrate, open_database

        db = open_database(args.database_url)
        applied = migrate(db)
        DBOS.migrate(args.database_url)
        db.dispose()
        print(f"migrated: applied {applied or 'nothing new'}")
        return 0
    if cmd == "tokens":
        from pydantic import ValidationError

        from contracts import Role
        from shim._auth import add_token

        try:
            roles = [Role(r.strip()) for r in args.roles.split(",") if r.strip()]
            token = add_token(Path(args.file), args.identity, roles)
        except (ValueError, ValidationError) as exc:
            print(f"gatehouse: {exc}", file=sys.stderr)
            return 2
        print(f"token for {args.identity} ({', '.join(r.value for r in roles)}), shown once:")
        print(token)
        return 0
    if cmd == "opa":
        from shim._opa_cli import run_opa

        return run_opa(args)
    if cmd == "sql":
        from contracts import GatehouseError
        from ledger import open_database
        from ledger.operator import read_only_query

        db = open_database(args.database_url)
        try:
            columns, rows = read_only_query(db, args.query)
        except GatehouseError as exc:
            print(f"gatehouse: {exc.message}", file=sys.stderr)
            return 1
        finally:
            db.dispose()
        widths = [max([len(c)] + [len(r[i]) for r in rows]) for i, c in enumerate(columns)]
        print("  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True)))
        for r in rows:
            print("  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)))
        return 0
    return _api(args)


def _api(args: argparse.Namespace) -> int:
    import httpx

    from shim._client import ApiError, Client, dump, explain_text

    api = Client(args.url, args.token)
    try:
        if args.command == "submit":
            intent: dict[str, JsonValue] = {
                "recipe": args.recipe,
                "objective": args.objective,
                "mode": args.mode,
                "parameters": dict(_param(p) for p in args.param),
            }
            if args.plan:
                try:
                    intent["plan"] = json.loads(Path(args.plan).read_text("utf-8"))
                except (OSError, ValueError) as exc:
                    print(f"gatehouse: cannot read the plan {args.plan}: {exc}", file=sys.stderr)
                    return 2
            out = dump(api.submit(intent, args.idempotency_key))
        elif args.command == "runs" and args.action == "fork":
            if not args.run_id or args.from_step is None:
                print("gatehouse: runs fork RUN_ID --from-step N", file=sys.stderr)
                return 2
            out = dump(api.fork(args.run_id, args.from_step))
        elif args.command == "runs":
            out = dump(api.runs(args.status))
        elif args.command == "replay":
            report = api.replay(args.run_id)
            print(json.dumps(dump(report), indent=2))
            return 0 if report.match else 3
        elif args.command == "explain":
            view = api.explain(args.run_id)
            print(json.dumps(dump(view), indent=2) if args.json else explain_text(view))
            return 0
        elif args.command == "calls":
            out = dump(api.resolve(args.op_key, bool(args.applied), args.note))
        elif args.command == "cancel":
            out = dump(api.cancel(args.run_id, args.reason))
        elif args.command == "show":
            out = dump(api.run(args.run_id))
        elif args.command == "ledger":
            out = api.verify_ledger(args.run_id)
            print(json.dumps(out, indent=2))
            return 0 if isinstance(out, dict) and out.get("ok") is True else 3
        else:
            card = None if args.digest else api.run(args.run_id).plan_card
            digest = args.digest or (card.plan_digest if card else None)
            if not digest:
                print("gatehouse: the run has no plan card yet; pass --digest", file=sys.stderr)
                return 2
            approve = args.command == "approve"
            out = dump(api.decide(args.run_id, approve, digest, args.comment))
    except ApiError as exc:
        print(f"gatehouse: {exc}", file=sys.stderr)
        return 1
    except httpx.HTTPError as exc:
        print(f"gatehouse: cannot reach the shim at {args.url}: {exc}", file=sys.stderr)
        return 1
    finally:
        api.close()
    print(json.dumps(out, indent=2))
    return 0
