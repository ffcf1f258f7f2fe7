"""The worker's sub-packages and what each may import (checked over the AST).

Read bottom-up: the pure flow imports no other part of the worker; the
workflow engine (``durable/``, the only folder that imports DBOS) sits on top
of everything that does the work; the entry points (``app``, ``doctor``,
``mcp_pin``, ``__main__``) compose them. Every import counts, lazy ones too. A
sub-package missing from the table fails the test, so a new folder is placed
in it on purpose.
"""

from __future__ import annotations

import pytest

from tests.static._source import Finding, Source, from_text, product_sources, report
from tests.static.test_import_boundaries import imported_modules

# sub-package -> the other worker sub-packages it may import
TABLE: dict[str, frozenset[str]] = {
    "flow": frozenset(),  # pure: contracts and policies only (see below)
    "notify": frozenset(),
    "sandbox": frozenset(),
    "scripted_model": frozenset(),
    "runtime": frozenset({"notify"}),
    "handlers": frozenset({"runtime", "sandbox"}),
    "coordinator": frozenset({"handlers"}),
    "opa": frozenset({"runtime"}),
    "planners": frozenset({"handlers", "runtime"}),
    "records": frozenset({"flow", "runtime"}),
    "calls": frozenset(
        {"coordinator", "flow", "handlers", "opa", "planners", "records", "runtime"}
    ),
    "replay": frozenset({"calls", "flow", "records", "runtime"}),
    "explain": frozenset({"calls", "flow", "planners", "runtime"}),
    "durable": frozenset({"calls", "explain", "flow", "opa", "records", "replay", "runtime"}),
}
# What the flow may import at all: it reaches the world only through its ports.
FLOW_MAY_IMPORT = frozenset({"contracts", "policies", "worker.flow"})
ENTRY_POINTS = frozenset(
    {"worker", "worker.__main__", "worker.app", "worker.doctor", "worker.mcp_pin"}
)


def sub_package(module: str) -> str | None:
    """``worker.flow._run`` -> ``flow``; None for the entry points at the top."""
    parts = module.split(".")
    if parts[0] != "worker" or module in ENTRY_POINTS or len(parts) < 2:
        return None
    return parts[1]


def check(source: Source) -> list[Finding]:
    here = sub_package(source.module)
    if here is None:
        return []
    if here not in TABLE:
        return [Finding(source.rel, 1, f"worker/{here}/ is not in the sub-package table")]
    findings: list[Finding] = []
    for line, target in imported_modules(source):
        there = sub_package(target)
        if target.split(".")[0] == "worker" and target in ENTRY_POINTS and target != "worker":
            findings.append(Finding(source.rel, line, f"{here} imports the entry point {target}"))
        elif there is not None and there != here and there not in TABLE[here]:
            allowed = ", ".join(sorted(TABLE[here])) or "no other sub-package"
            findings.append(
                Finding(source.rel, line, f"{here} imports {target} ({here} may import {allowed})")
            )
        if here == "flow" and not any(
            target == ok or target.startswith(ok + ".") for ok in FLOW_MAY_IMPORT
        ):
            top = target.split(".")[0]
            if top in ("dbos", "sqlalchemy", "ledger", "worker", "shim", "opa_format", "httpx"):
                findings.append(Finding(source.rel, line, f"the flow imports {target}"))
        if target.split(".")[0] == "dbos" and here != "durable":
            findings.append(
                Finding(source.rel, line, f"{here} imports {target}: DBOS belongs in durable/")
            )
    return findings


def test_worker_sub_packages_import_only_what_the_table_allows() -> None:
    findings = [f for s in product_sources(("worker",)) for f in check(s)]
    if findings:
        pytest.fail(report("worker imports across sub-packages", findings), pytrace=False)


def test_the_table_has_no_cycle() -> None:
    seen: set[str] = set()

    def visit(node: str, path: tuple[str, ...]) -> None:
        assert node not in path, f"cycle in the table: {' -> '.join((*path, node))}"
        if node in seen:
            return
        for nxt in TABLE[node]:
            visit(nxt, (*path, node))
        seen.add(node)

    for name in TABLE:
        visit(name, ())


@pytest.mark.parametrize(
    ("rel", "text", "bad"),
    [
        ("worker/flow/_run.py", "from ledger import calls\n", True),
        ("worker/flow/_run.py", "from dbos import DBOS\n", True),
        ("worker/flow/_run.py", "from worker.runtime import runtime\n", True),
        ("worker/flow/_run.py", "from worker.flow._seed import draw\n", False),
        ("worker/flow/_run.py", "from policies.gate import check_step\n", False),
        ("worker/records/_x.py", "from worker.durable import tx\n", True),
        ("worker/records/_x.py", "def f() -> None:\n    from dbos import DBOS\n", True),
        ("worker/durable/_x.py", "from dbos import DBOS\n", False),
        ("worker/durable/_x.py", "from worker.app import launch\n", True),
        ("worker/calls/_x.py", "from worker.records import write_step\n", False),
        ("worker/newthing/x.py", "import json\n", True),
        ("worker/app.py", "from worker.durable import start_dbos\n", False),
    ],
)
def test_self_check_cases(rel: str, text: str, bad: bool) -> None:
    assert bool(check(from_text(text, rel))) is bad
