"""``gatehouse policy test|what-if|schema``: policies tested like code, proposed rules
tried on every recorded run, and the Cedar schema policies are written against.

``test`` runs policy test files (``contracts.PolicyTestFile``) through the gate: no
database, no shim. ``what-if`` reads the database directly, read-only, as ``gatehouse
sql`` does: every recorded plan, decided under the rules of its time and under the
proposed ones (``policies.what_if``), each step it ran on the input it ran with and with
its approver; nothing is written and nothing is sent.
``schema`` prints the Cedar schema generated from the tool pools in force.
"""

from __future__ import annotations

import argparse
import re
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

from pydantic import ValidationError

from contracts import (
    CedarRules,
    GatehouseError,
    JsonObject,
    JsonValue,
    PolicyProfile,
    PolicyTestFile,
    WhatIfReport,
    sha256_hex,
)
from ledger import open_database, policy_versions, recorded_plans
from policies import catalog, cedar_gate, cedar_schema
from policies.policy_tests import CaseResult, run_case
from policies.what_if import Proposal, RulesOfTheirTime, what_if
from shim.cli.database import require_database
from shim.cli.errors import Exit, FailedError, UsageError
from shim.cli.options import database_option, database_url, json_option
from shim.cli.output import show, write_json
from shim.cli.render import fields, print_records

__all__ = ["add_arguments", "run"]

_SINCE = re.compile(r"^(\d+)([dh])$")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="policy_command", required=True, metavar="ACTION")
    test = sub.add_parser(
        "test",
        help="run policy test files: each case's plan through the gate, each step's decision"
        " checked; exit 3 when an expectation fails",
    )
    test.add_argument("paths", nargs="+", type=Path, metavar="PATH", help="test files (JSON)")
    test.add_argument(
        "--cedar",
        type=Path,
        metavar="FILE",
        help="a Cedar policy set to test instead of the one the file's profile names",
    )
    json_option(test, "the results")
    whatif = sub.add_parser(
        "what-if",
        help="decide every recorded plan under the rules of its time and under proposed"
        " ones; report the steps that would now be refused or newly allowed (read-only)",
    )
    whatif.add_argument(
        "proposed",
        metavar="PROFILE_OR_POLICY",
        help="a profile file (.json) or a Cedar policy set file (.cedar), or the id of a"
        " profile or policy set in force today",
    )
    whatif.add_argument(
        "--since",
        help="only runs created since: an ISO date or time (2026-11-01), or an age (30d, 12h)",
    )
    whatif.add_argument(
        "--profile",
        metavar="ID",
        help="a Cedar policy set: try it on this profile's runs (default: the runs whose"
        " profile names a set of the same id)",
    )
    database_option(whatif)
    json_option(whatif, "the report")
    sub.add_parser(
        "schema", help="print the Cedar schema (JSON) generated from the tool pools in force"
    )


def run(args: argparse.Namespace) -> int:
    try:
        if args.policy_command == "test":
            return _test(args)
        if args.policy_command == "what-if":
            return _what_if(args)
        write_json(cedar_schema.schema_for([p.model for p in catalog.list_tool_pools()]))
        return Exit.OK
    except GatehouseError as exc:
        raise FailedError(f"{exc.code.value}: {exc.message}") from exc
    except RuntimeError as exc:  # a policy file in force that does not load
        raise FailedError(str(exc)) from exc


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read {path}: {exc}") from exc


def _cedar_file(path: Path) -> CedarRules:
    pools = [p.model for p in catalog.list_tool_pools()]
    try:
        return cedar_gate.load_policy_set(path.stem, _read(path), pools)
    except GatehouseError as exc:
        raise UsageError(f"{path}: {exc.message}") from exc


# -- test


def _test(args: argparse.Namespace) -> int:
    proposed = None if args.cedar is None else _cedar_file(args.cedar)
    results: list[tuple[Path, CaseResult]] = []
    for path in args.paths:
        try:
            tests = PolicyTestFile.model_validate_json(_read(path))
        except ValidationError as exc:
            first = exc.errors()[0]
            where = "/".join(str(p) for p in first["loc"])
            raise UsageError(f"{path} is not a policy test file: {where}: {first['msg']}") from exc
        profile = catalog.profile(tests.profile).model
        if proposed is not None:
            profile = profile.model_copy(
                update={"cedar": proposed.policy_set_id, "cedar_rules": proposed}
            )
        pool = catalog.tool_pool(tests.tool_pool).model
        results += [(path, run_case(case, profile, pool)) for case in tests.cases]
    failed = [r for _, r in results if not r.ok]
    raw: list[JsonValue] = [
        {
            "file": str(path),
            "case": r.name,
            "ok": r.ok,
            "problems": list[JsonValue](r.problems),
            "steps": [
                {
                    "step_id": s.step_id,
                    "expected": s.expected,
                    "got": s.got,
                    "ok": s.ok,
                    "message": s.message,
                }
                for s in r.steps
            ],
        }
        for path, r in results
    ]
    if args.json:
        write_json({"cases": len(results), "failed": len(failed), "results": raw})
    else:
        _print_tests(results)
    return Exit.CHECK_FAILED if failed else Exit.OK


def _print_tests(results: list[tuple[Path, CaseResult]]) -> None:
    out = sys.stdout
    for path, r in results:
        out.write(f"{'PASS' if r.ok else 'FAIL'}  {path.name}: {r.name}\n")
        for problem in r.problems:
            out.write(f"      {problem}\n")
        for s in r.steps:
            if s.ok:
                continue
            out.write(f"      step {s.step_id}: expected {s.expected}, got {s.got}\n")
            if s.message:
                out.write(f"        {s.message}\n")
    failed = sum(not r.ok for _, r in results)
    out.write(f"{len(results)} cases, {len(results) - failed} passed, {failed} failed\n")


# -- what-if


def _since(text: str | None) -> str | None:
    if text is None:
        return None
    age = _SINCE.match(text)
    if age is not None:
        n, unit = int(age.group(1)), age.group(2)
        delta = timedelta(days=n) if unit == "d" else timedelta(hours=n)
        return (datetime.now(UTC) - delta).isoformat()
    try:
        stamp = datetime.fromisoformat(text)
    except ValueError as exc:
        raise UsageError(
            f"--since {text!r}: give an ISO date or time, or an age (30d, 12h)"
        ) from exc
    return (stamp if stamp.tzinfo else stamp.replace(tzinfo=UTC)).astimezone(UTC).isoformat()


def _proposal(args: argparse.Namespace) -> tuple[Proposal, str, list[str] | None]:
    """The proposed rules, their digest, and the profiles whose runs they may apply to."""
    given: str = args.proposed
    path = Path(given)
    if given.endswith(".cedar"):
        rules = _cedar_file(path)
        return Proposal(cedar=rules, for_profile=args.profile), rules.digest, None
    if given.endswith(".json"):
        text = _read(path)
        try:
            model = PolicyProfile.model_validate_json(text)
        except ValidationError as exc:
            raise UsageError(f"{path} is not a policy profile: {exc.errors()[0]['msg']}") from exc
        loaded = catalog.with_cedar(catalog.Loaded(model, sha256_hex(text.encode()), text), given)
        return Proposal(profile=loaded.model), loaded.digest, [model.profile_id]
    found = catalog.cedar_policy_set(given)
    if found is not None:
        return Proposal(cedar=found.model, for_profile=args.profile), found.digest, None
    profile = catalog.profile(given)  # unknown_profile names the ones there are
    return Proposal(profile=profile.model), profile.digest, [given]


def _what_if(args: argparse.Namespace) -> int:
    proposal, digest, profiles = _proposal(args)
    if args.profile is not None and proposal.cedar is None:
        raise UsageError("--profile goes with a Cedar policy set, not with a profile")
    if args.profile is not None:
        profiles = [args.profile]
    since = _since(args.since)
    url, source = database_url(args)
    require_database(url, source, read_only=True)
    db = open_database(url)
    try:
        with db.engine.connect() as conn:
            kept = {d: (v.policy_id, v.body) for d, v in policy_versions.all_versions(conn).items()}
            plans = recorded_plans.recorded_plans(conn, since=since, profiles=profiles)
            report = what_if(plans, proposal, RulesOfTheirTime(kept), digest)
    finally:
        db.dispose()
    _print_report(args, report)
    return Exit.OK


def _print_report(args: argparse.Namespace, report: WhatIfReport) -> None:
    raw: JsonObject = report.model_dump(mode="json")
    if args.json:
        write_json(raw)
        return
    totals: dict[str, JsonValue] = {k: v for k, v in raw.items() if k != "runs"}
    changes: list[dict[str, JsonValue]] = [
        {
            "run_id": r.run_id,
            "created_at": r.created_at,
            "submitted_by": r.submitted_by,
            "step_id": c.step_id,
            "change": c.change.replace("_", " "),
            "as": c.decided_as,
            "approved_by": c.approved_by or "",
            "code": c.code,
            "policies": ", ".join(c.policy_ids),
            "reason": c.reason,
        }
        for r in report.runs
        for c in r.changes
    ]
    show(args, raw, fields("What if", totals))
    if changes:
        columns = ["run_id", "created_at", "submitted_by", "step_id", "change", "as"]
        columns += ["approved_by", "code"]
        print_records("Changed decisions", [*columns, "policies", "reason"], changes, limit=100)
    else:
        sys.stdout.write("No step's decision would change.\n")
