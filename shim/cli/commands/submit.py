"""``gatehouse submit``: submit an intent (``--wait``: and follow the run)."""

from __future__ import annotations

import argparse
import json
import math
import re
from pathlib import Path

from pydantic import ValidationError

from contracts import Budgets, IntentRequest, JsonObject, JsonValue
from shim.cli.errors import Exit, UsageError
from shim.cli.follow import no_worker, waited
from shim.cli.options import api_options, connect, wait_option
from shim.cli.output import answer, note

__all__ = ["STALE_QUEUE_S", "add_arguments", "run", "submit_warnings"]

_KINDS = ", ".join(Budgets.model_fields)

# Queued longer than this behind live workers: the workers are likely full.
STALE_QUEUE_S = 30.0


def add_arguments(p: argparse.ArgumentParser) -> None:
    api_options(p)
    p.add_argument("--recipe", required=True, help="the recipe to run (gatehouse recipes)")
    p.add_argument("--objective", required=True, help="what the run is for, in words")
    p.add_argument(
        "--param",
        action="append",
        default=[],
        metavar="KEY=JSON_OR_TEXT",
        help="a recipe parameter; repeat for more (a value that is not JSON is text)",
    )
    p.add_argument(
        "--mode",
        default="full-cycle",
        choices=["plan-only", "run-plan", "full-cycle"],
        help="stop at the plan card, run a supplied plan, or all of it (default full-cycle)",
    )
    p.add_argument("--plan", help="file with a plan (mode run-plan)")
    p.add_argument(
        "--policy-profile", help="the policy profile to gate with (gatehouse policies; default)"
    )
    p.add_argument("--tool-pool", help="the tool pool to run with (default)")
    p.add_argument(
        "--budget",
        action="append",
        default=[],
        metavar="KIND=NUMBER",
        help=f"narrow one of the profile's budgets for this run; repeat for more ({_KINDS})",
    )
    p.add_argument("--idempotency-key", help="a repeated key returns the same run")
    wait_option(p)


def _param(text: str) -> tuple[str, JsonValue]:
    key, _, raw = text.partition("=")
    try:
        return key, json.loads(raw)
    except json.JSONDecodeError:
        return key, raw


def _name(option: str, field: str, value: str) -> str:
    """``value`` if it can name a profile or a pool (the intent's own pattern), else a
    usage error: the API would refuse the whole intent for it."""
    pattern = IntentRequest.model_json_schema()["properties"][field]["pattern"]
    if not re.fullmatch(pattern, value):
        raise UsageError(
            f"{option} {value!r}: a name is lowercase letters, digits and . _ : -, at most 64,"
            " starting with a letter or digit (gatehouse policies lists them)"
        )
    return value


def _number(text: str, raw: str) -> int | float:
    try:
        return int(raw)
    except ValueError:
        pass
    try:
        number = float(raw)
    except ValueError:
        number = math.nan
    if not math.isfinite(number):
        raise UsageError(f"--budget {text!r}: {raw!r} is not a number")
    return number


def _budgets(given: list[str]) -> JsonObject:
    """Each --budget KIND=NUMBER, checked as the intent's budgets are: an unknown kind,
    a kind given twice, or a value out of its range is a usage error."""
    out: JsonObject = {}
    for text in given:
        kind, _, raw = text.partition("=")
        if kind not in Budgets.model_fields:
            raise UsageError(f"--budget {text!r}: the kinds are {_KINDS}")
        if kind in out:
            raise UsageError(f"--budget {kind} is given twice")
        out[kind] = _number(text, raw)
    try:
        Budgets.model_validate(out)
    except ValidationError as exc:
        first = exc.errors()[0]
        kind = str(first["loc"][0])
        why = str(first["msg"]).removeprefix("Input ")
        raise UsageError(f"--budget {kind}={out[kind]}: {why}") from exc
    return out


def run(args: argparse.Namespace) -> int:
    intent: JsonObject = {
        "recipe": args.recipe,
        "objective": args.objective,
        "mode": args.mode,
        "parameters": dict(_param(p) for p in args.param),
    }
    if args.policy_profile is not None:
        intent["policy_profile"] = _name("--policy-profile", "policy_profile", args.policy_profile)
    if args.tool_pool is not None:
        intent["tool_pool"] = _name("--tool-pool", "tool_pool", args.tool_pool)
    if args.budget:
        intent["budgets"] = _budgets(args.budget)
    with connect(args) as api:
        if args.plan:
            try:
                intent["plan"] = json.loads(Path(args.plan).read_text("utf-8"))
            except (OSError, ValueError) as exc:
                raise UsageError(f"cannot read the plan {args.plan}: {exc}") from exc
        accepted = api.submit(intent, args.idempotency_key)
        if args.wait is None:
            answer(args, f"Run {accepted.run_id} {accepted.status}", accepted)
        for warning in submit_warnings(*api.ready()):
            note(f"warning: {warning}")
        if args.wait is not None:
            return waited(api, args, accepted.run_id)
    return Exit.OK


def submit_warnings(ready: bool, report: JsonValue) -> list[str]:
    """What a person should know about a run just queued, from GET /readyz."""
    if not isinstance(report, dict):
        return []
    absent = no_worker(ready, report)
    if absent is not None:
        return [absent]
    queue = report.get("queue")
    oldest = queue.get("oldest_queued_s") if isinstance(queue, dict) else None
    if isinstance(queue, dict) and isinstance(oldest, int | float) and oldest > STALE_QUEUE_S:
        return [
            f"{queue.get('queued')} run(s) queued, the oldest for {oldest:.0f} s, although"
            " workers are live: their slots (GATEHOUSE_WORKER_CONCURRENCY) are taken by runs"
            " executing, or this submitter's runs hold their share (GATEHOUSE_WORKER_SHARE);"
            " runs waiting for a decision or for input hold none. Add workers"
            " (gatehouse workers; gatehouse runs --status running)"
        ]
    return []
