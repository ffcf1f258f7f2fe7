"""The CLI commands that talk to a running shim over HTTP.

Each makes its call(s) through ``shim._client.Client`` and prints either the
tables of ``shim._render`` or, with ``--json``, the API's answer as it came.
An error answer is printed as its code, message and details (the known
recipes, the failing path, the allowed values), one line each.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

import httpx
from pydantic import BaseModel

from contracts import JsonObject, JsonValue, RunStatus, RunView
from shim._client import ApiError, Client, dump, explain_text
from shim._render import (
    console,
    error_lines,
    fields,
    ledger_table,
    records,
    run_card,
    run_list,
    short,
)
from shim._watch import watch

__all__ = ["STALE_QUEUE_S", "run_api", "submit_warnings"]

OK, FAILED, USAGE, CHECK_FAILED = 0, 1, 2, 3


def _err(text: str) -> None:
    sys.stderr.write(f"gatehouse: {text}\n")


def _json(value: JsonValue) -> None:
    sys.stdout.write(json.dumps(value, indent=2) + "\n")


def _show(args: argparse.Namespace, raw: JsonValue, *tables: object) -> None:
    if args.json:
        _json(raw)
        return
    out = console()
    for i, t in enumerate(tables):
        if i:
            out.print()
        out.print(t)


def _answer(args: argparse.Namespace, title: str, model: BaseModel) -> int:
    raw = dump(model)
    info: dict[str, JsonValue] = dict(raw) if isinstance(raw, dict) else {"answer": raw}
    links = info.pop("links", None)
    if isinstance(links, dict) and isinstance(info.get("run_id"), str):
        info["next"] = f"gatehouse show {info['run_id']}"
    _show(args, raw, fields(title, info))
    return OK


def _param(text: str) -> tuple[str, JsonValue]:
    key, _, raw = text.partition("=")
    try:
        return key, json.loads(raw)
    except json.JSONDecodeError:
        return key, raw


def run_api(args: argparse.Namespace) -> int:
    if not args.token:
        _err(
            "no token: set GATEHOUSE_TOKEN or pass --token (`gatehouse tokens add NAME --roles"
            " …` makes one; `gatehouse up` keeps its local ones in var/local-tokens.txt)"
        )
        return USAGE
    api = Client(args.url, args.token, ca=args.ca)
    try:
        return _command(api, args)
    except ApiError as exc:
        _err(f"{exc.code} (HTTP {exc.status}): {exc.message}")
        for line in error_lines(exc.details):
            sys.stderr.write(line + "\n")
        if exc.status == 401:
            sys.stderr.write("  check the token: GATEHOUSE_TOKEN or --token\n")
        return FAILED
    except httpx.HTTPError as exc:
        _err(
            f"cannot reach the shim at {args.url} ({type(exc).__name__}: {exc}): start it"
            " (gatehouse up, or gatehouse shim) or point --url / GATEHOUSE_URL at it"
        )
        return FAILED
    finally:
        api.close()


def _command(api: Client, args: argparse.Namespace) -> int:
    cmd = args.command
    if cmd == "submit":
        return _submit(api, args)
    if cmd == "runs":
        return _runs(api, args)
    if cmd == "show":
        view = api.run(args.run_id)
        _show(args, dump(view), *run_card(view))
        return OK
    if cmd in ("approve", "reject"):
        card = None if args.digest else api.run(args.run_id).plan_card
        digest = args.digest or (card.plan_digest if card else None)
        if not digest:
            _err("the run has no plan card yet; pass --digest")
            return USAGE
        decided = api.decide(args.run_id, cmd == "approve", digest, args.comment)
        if args.wait is not None:
            return _waited(api, args, args.run_id, decided=True)
        return _answer(args, f"Decision on {args.run_id}", decided)
    if cmd == "cancel":
        return _answer(args, f"Cancel of {args.run_id}", api.cancel(args.run_id, args.reason))
    if cmd == "calls":
        resolved = api.resolve(args.op_key, bool(args.applied), args.note)
        return _answer(args, f"Call {args.op_key[:16]}…", resolved)
    if cmd == "replay":
        report = api.replay(args.run_id, "current" if args.current_rules else "recorded")
        raw = dump(report)
        title = "Replay: trace digest " + ("matches" if report.match else "DIVERGED")
        info = {k: v for k, v in raw.items() if k != "divergences"} if isinstance(raw, dict) else {}
        divergences = [d.model_dump(mode="json") for d in report.divergences]
        cols = list(divergences[0]) if divergences else []
        tables = [fields(title, info)]
        if divergences:
            tables.append(records("Divergences", cols, divergences))
        _show(args, raw, *tables)
        return OK if report.match else CHECK_FAILED
    if cmd == "explain":
        answer = api.explain(args.run_id)
        if args.json:
            _json(dump(answer))
        else:
            sys.stdout.write(explain_text(answer) + "\n")
        return OK
    if cmd == "ledger":
        return _ledger(api, args)
    return _reads(api, args)


def _submit(api: Client, args: argparse.Namespace) -> int:
    intent: JsonObject = {
        "recipe": args.recipe,
        "objective": args.objective,
        "mode": args.mode,
        "parameters": dict(_param(p) for p in args.param),
    }
    if args.plan:
        try:
            intent["plan"] = json.loads(Path(args.plan).read_text("utf-8"))
        except (OSError, ValueError) as exc:
            _err(f"cannot read the plan {args.plan}: {exc}")
            return USAGE
    accepted = api.submit(intent, args.idempotency_key)
    if args.wait is None:
        _answer(args, f"Run {accepted.run_id} {accepted.status}", accepted)
    for warning in submit_warnings(*api.ready()):
        _err(f"warning: {warning}")
    if args.wait is not None:
        return _waited(api, args, accepted.run_id)
    return OK


# Where ``--wait`` stops following a run: it is over, or a person must act on it.
FINISHED = {"succeeded", "planned", "failed", "rejected", "cancelled"}
NEEDS_A_PERSON = {"waiting_approval", "needs_operator", "waiting_input"}


def follow(
    api: Client,
    run_id: str,
    timeout_s: float,
    say: Callable[[str], None],
    decided: bool = False,
) -> RunView:
    """Follow a run until it is over or waits for a person, saying each status change
    and each finished step; raises TimeoutError after ``timeout_s``. ``decided``: a
    decision was just sent, so the wait for it that the run may still show is not
    where to stop."""
    deadline = time.monotonic() + timeout_s
    status, seen = "", set[str]()

    def tell(view: RunView) -> None:
        nonlocal status
        if view.status.value != status:
            status = view.status.value
            say(f"{run_id}: {status} ({view.phase})")
        for step in view.steps:
            if step.step_id not in seen:
                seen.add(step.step_id)
                code = f" {step.error_code}" if step.error_code else ""
                say(f"  step {step.step_id}: {step.status}{code}")

    if decided:  # first past the wait for the decision just sent
        others = {s.value for s in RunStatus} - {"waiting_approval"}
        api.wait(run_id, others, timeout_s, tell)
    return api.wait(run_id, FINISHED | NEEDS_A_PERSON, deadline - time.monotonic(), tell)


def _progress(line: str) -> None:
    sys.stderr.write(line + "\n")
    sys.stderr.flush()


def _waited(api: Client, args: argparse.Namespace, run_id: str, decided: bool = False) -> int:
    """``--wait``: follow the run (progress on stderr), then print its card. 0 when it
    succeeded, was planned or waits for a person (the card says what to do); 1 when it
    failed, was rejected or cancelled, or the wait ran out."""
    try:
        view = follow(api, run_id, float(args.wait), _progress, decided)
    except TimeoutError as exc:
        _err(f"{exc}; it goes on: gatehouse show {run_id}")
        return FAILED
    _show(args, dump(view), *run_card(view))
    return FAILED if view.status.value in ("failed", "rejected", "cancelled") else OK


# Queued longer than this behind live workers: the workers are likely full.
STALE_QUEUE_S = 30.0


def submit_warnings(ready: bool, report: JsonValue) -> list[str]:
    """What a person should know about a run just queued, from GET /readyz."""
    if not isinstance(report, dict):
        return []
    checks = report.get("checks")
    workers = checks.get("workers") if isinstance(checks, dict) else None
    if not ready and isinstance(workers, dict) and workers.get("ok") is False:
        return [str(workers.get("reason"))]
    queue = report.get("queue")
    oldest = queue.get("oldest_queued_s") if isinstance(queue, dict) else None
    if isinstance(queue, dict) and isinstance(oldest, int | float) and oldest > STALE_QUEUE_S:
        return [
            f"{queue.get('queued')} run(s) queued, the oldest for {oldest:.0f} s, although"
            " workers are live: each run waiting for approval or input holds one of its"
            " worker's slots (GATEHOUSE_WORKER_CONCURRENCY); decide on them, or add workers"
            " (gatehouse workers, gatehouse runs --status waiting_approval)"
        ]
    return []


def _runs(api: Client, args: argparse.Namespace) -> int:
    if args.action == "watch":
        if not args.run_id:
            _err("runs watch RUN_ID")
            return USAGE
        return watch(api, args.run_id, console())
    if args.action == "fork":
        if not args.run_id or args.from_step is None:
            _err("runs fork RUN_ID --from-step N")
            return USAGE
        return _answer(args, f"Fork of {args.run_id}", api.fork(args.run_id, args.from_step))
    page = api.runs(args.status, args.limit, args.cursor)
    _show(args, dump(page), run_list(page))
    return OK


def _ledger(api: Client, args: argparse.Namespace) -> int:
    if args.action == "show":
        calls = api.ledger(args.run_id)
        _show(args, {"calls": dump(calls)}, ledger_table(calls))
        return OK
    out = api.verify_ledger(args.run_id)
    ok = isinstance(out, dict) and out.get("ok") is True
    info: dict[str, JsonValue] = dict(out) if isinstance(out, dict) else {"answer": out}
    _show(args, out, fields("Ledger chain " + ("intact" if ok else "BROKEN"), info))
    return OK if ok else CHECK_FAILED


def _rows(raw: JsonValue, key: str) -> list[dict[str, JsonValue]]:
    found = raw.get(key) if isinstance(raw, dict) else None
    return [r for r in (found if isinstance(found, list) else []) if isinstance(r, dict)]


def _reads(api: Client, args: argparse.Namespace) -> int:
    cmd = args.command
    if cmd == "workers":
        raw = api.get_json("/workers")
        rows = _rows(raw, "workers")
        for r in rows:
            r["heartbeat"] = f"{r.get('heartbeat_age_s')} s ago"
            planners = r.get("planners")
            r["planners"] = ", ".join(map(str, planners)) if isinstance(planners, list) else "?"
        cols = ["executor_id", "live", "heartbeat", "planners", "app_version", "hostname", "pid"]
        cols.append("reaped_at")
        table = records("Workers", cols, rows)
        if isinstance(raw, dict):
            table.caption = (
                f"live: a heartbeat within {raw.get('dead_after_s')} s; runs are enqueued"
                f" for version {raw.get('app_version')}"
            )
        listed = _rows(raw, "versions")
        for v in listed:
            v["unfinished"] = int(str(v.get("pending", 0))) + int(str(v.get("enqueued", 0)))
        cols = ["app_version", "current", "unfinished", "pending", "enqueued", "live_workers"]
        by_version = records("Runs by application version", [*cols, "served"], listed)
        said = raw.get("warnings") if isinstance(raw, dict) else None
        if isinstance(said, list) and said:
            by_version.caption = "\n".join(map(str, said))
        _show(args, raw, table, by_version)
        return OK
    if cmd == "recipes":
        raw = api.get_json("/recipes")
        rows = _rows(raw, "recipes")
        for r in rows:
            schema = r.get("parameters_schema")
            needed = schema.get("required") if isinstance(schema, dict) else None
            names = [str(n) for n in needed] if isinstance(needed, list) else []
            r["required parameters"] = ", ".join(names) or "-"
        cols = ["recipe_id", "title", "planner", "required parameters", "digest"]
        _show(args, raw, records("Recipes", cols, rows, limit=64))
        return OK
    if cmd == "policies":
        return _policies(api, args)
    if cmd == "episodes":
        raw = api.get_json(f"/runs/{args.run_id}/episodes")
        cols = ["recorded_at", "step_id", "episode_type", "result_status", "episode_id"]
        _show(args, raw, records(f"Episodes of {args.run_id}", cols, _rows(raw, "episodes")))
        return OK
    if cmd == "artifacts":
        return _artifacts(api, args)
    raw = api.get_json("/security-events", {"limit": str(args.limit)})
    cols = [
        "recorded_at",
        "last_seen_at",
        "repeat_count",
        "security_event_type",
        "security_event_category",
        "severity",
        "episode_id",
    ]
    _show(args, raw, records("Security events", cols, _rows(raw, "security_events")))
    return OK


def _policies(api: Client, args: argparse.Namespace) -> int:
    if args.policy_id:
        raw = api.get_json(f"/policies/{args.policy_id}")
        if args.json or not isinstance(raw, dict):
            _json(raw)
            return OK
        out = console()
        for kind in ("profile", "tool_pool"):
            found = raw.get(kind)
            if isinstance(found, dict):
                out.print(fields(f"{kind} {args.policy_id}", {"digest": found.get("digest")}))
                out.print_json(data=found.get("content"))
        return OK
    raw = api.get_json("/policies")
    tables = []
    for key, id_key in (("profiles", "profile_id"), ("tool_pools", "tool_pool_id")):
        rows = []
        for r in _rows(raw, key):
            content = r.get("content")
            name = content.get(id_key) if isinstance(content, dict) else None
            rows.append({"id": name, "digest": r.get("digest")})
        title = key.replace("_", " ").capitalize()
        tables.append(records(title, ["id", "digest"], rows, limit=64))
    _show(args, raw, *tables)
    return OK


def _artifacts(api: Client, args: argparse.Namespace) -> int:
    if args.action == "get":
        content = api.artifact(args.ref)
        if args.output:
            Path(args.output).write_bytes(content)
            _err(f"wrote {len(content)} bytes to {args.output}")
        else:
            sys.stdout.buffer.write(content)
        return OK
    raw = api.get_json(f"/runs/{args.ref}/artifacts")
    rows = _rows(raw, "artifacts")
    cols = ["step_id", "name", "media_type", "size_bytes", "sha256"]
    table = records(f"Artifacts of {args.ref}", cols, rows, limit=64)
    if rows:
        table.caption = f"fetch one: gatehouse artifacts get {short(rows[0].get('sha256'), 64)}"
    _show(args, raw, table)
    return OK
