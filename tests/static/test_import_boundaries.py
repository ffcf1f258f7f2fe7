"""Which of our packages each package may import (a design rule, checked over the AST).

    contracts  nothing of ours          vendor  nothing
    policies   contracts                ledger  contracts
    shim       contracts, ledger, policies, opa_format (NEVER worker)
    worker     contracts, ledger, policies, opa_format (never shim)
    opa_format contracts (the archive format is pure: no database, no DBOS)

Every ``import`` statement counts, wherever it is: module level, inside a
function (a lazy import), under ``if TYPE_CHECKING:``. Relative imports
resolve inside the importing package and so never cross a boundary, unless
they climb above the package root, which is reported too.
"""

from __future__ import annotations

import ast

import pytest

from tests.static._source import Finding, Source, from_text, product_sources, report

ALLOWED: dict[str, frozenset[str]] = {
    "contracts": frozenset(),
    "vendor": frozenset(),
    "policies": frozenset({"contracts"}),
    "ledger": frozenset({"contracts"}),
    "shim": frozenset({"contracts", "ledger", "policies", "opa_format"}),
    "worker": frozenset({"contracts", "ledger", "policies", "opa_format"}),
    "opa_format": frozenset({"contracts"}),
}
OURS = frozenset(ALLOWED)
CHECKED = ("contracts", "shim", "worker", "ledger", "policies", "vendor", "opa_format")


def imported_modules(source: Source) -> list[tuple[int, str]]:
    """(line, absolute dotted target) for every import in the file; relative ones resolved.

    A relative import that climbs above the top-level package resolves to
    ``"<above package root>"``.
    """
    out: list[tuple[int, str]] = []
    here = source.module.split(".")
    package_parts = here if source.is_package else here[:-1]
    for node in ast.walk(source.tree):
        if isinstance(node, ast.Import):
            out.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0:
                out.append((node.lineno, node.module or ""))
                continue
            keep = len(package_parts) - (node.level - 1)
            if keep < 1:
                out.append((node.lineno, "<above package root>"))
                continue
            base = package_parts[:keep]
            target = ".".join([*base, node.module] if node.module else base)
            out.append((node.lineno, target))
    return out


def check_imports(source: Source) -> list[Finding]:
    package = source.package
    allowed = ALLOWED[package]
    findings: list[Finding] = []
    for line, target in imported_modules(source):
        if target == "<above package root>":
            findings.append(Finding(source.rel, line, "relative import climbs above its package"))
            continue
        top = target.split(".")[0]
        if top in OURS and top != package and top not in allowed:
            may = ", ".join(sorted(allowed)) or "nothing of ours"
            findings.append(
                Finding(
                    source.rel, line, f"{package} imports {target} ({package} may import {may})"
                )
            )
    return findings


def check_shim_never_imports_worker(source: Source) -> list[Finding]:
    if source.package != "shim":
        return []
    return [
        Finding(source.rel, line, f"shim imports {target}: the shim must never import the worker")
        for line, target in imported_modules(source)
        if target.split(".")[0] == "worker"
    ]


def check_handlers_reach_no_database(source: Source) -> list[Finding]:
    """A handler (``worker/handlers``) gets what it may use of the worker in its
    ``HandlerContext``: it imports nothing of the ledger and not the global runtime."""
    if not source.module.startswith("worker.handlers"):
        return []
    found = []
    for node in ast.walk(source.tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module is not None:
            if node.module.split(".")[0] == "ledger":
                found.append(Finding(source.rel, node.lineno, f"a handler imports {node.module}"))
            elif node.module == "worker.runtime" and any(a.name == "runtime" for a in node.names):
                found.append(Finding(source.rel, node.lineno, "a handler imports runtime()"))
        elif isinstance(node, ast.Import):
            found.extend(
                Finding(source.rel, node.lineno, f"a handler imports {a.name}")
                for a in node.names
                if a.name.split(".")[0] == "ledger"
            )
    return found


def test_handlers_reach_the_worker_only_through_their_context() -> None:
    sources = product_sources(("worker",))
    findings = [f for s in sources for f in check_handlers_reach_no_database(s)]
    if findings:
        pytest.fail(report("handlers reaching past their context", findings), pytrace=False)


@pytest.mark.parametrize(
    ("text", "bad"),
    [
        ("from ledger import cancels\n", True),
        ("import ledger.calls\n", True),
        ("from worker.runtime import maybe_crash, runtime\n", True),
        ("from worker.runtime import WorkerSettings, maybe_crash\n", False),
    ],
)
def test_handler_check_cases(text: str, bad: bool) -> None:
    source = from_text(text, "worker/handlers/opencode/watch.py")
    assert bool(check_handlers_reach_no_database(source)) is bad
    assert check_handlers_reach_no_database(from_text(text, "worker/calls/_tool.py")) == []


def test_packages_import_only_what_the_table_allows() -> None:
    findings = [f for s in product_sources(CHECKED) for f in check_imports(s)]
    if findings:
        pytest.fail(report("imports that cross a package boundary", findings), pytrace=False)


def test_shim_never_imports_worker_even_lazily() -> None:
    findings = [f for s in product_sources(("shim",)) for f in check_shim_never_imports_worker(s)]
    if findings:
        pytest.fail(report("shim → worker imports", findings), pytrace=False)


def test_every_product_package_is_in_the_table() -> None:
    assert set(CHECKED) == OURS


# --- self-checks: the checker must catch what it claims to ------------------------------------

BAD_SHIM = """
from __future__ import annotations
from typing import TYPE_CHECKING
import contracts
from policies.gate import gate_plan
if TYPE_CHECKING:
    from worker.app import launch

def later() -> None:
    import worker.handlers.registry
"""


def test_self_check_catches_lazy_and_type_checking_imports() -> None:
    source = from_text(BAD_SHIM, "shim/bad.py")
    lines = sorted(f.line for f in check_imports(source))
    assert lines == [7, 10]
    assert sorted(f.line for f in check_shim_never_imports_worker(source)) == [7, 10]


@pytest.mark.parametrize(
    ("rel", "text", "bad"),
    [
        ("contracts/x.py", "from policies import gate\n", True),
        ("contracts/x.py", "from contracts._json import JsonObject\n", False),
        ("contracts/x.py", "from . import _json\n", False),
        ("contracts/sub/__init__.py", "from .. import plan\n", False),
        ("contracts/x.py", "from .. import shim\n", True),
        ("policies/x.py", "import ledger.calls\n", True),
        ("policies/x.py", "import contracts, worker\n", True),
        ("ledger/x.py", "from shim import app\n", True),
        ("ledger/x.py", "import sqlalchemy as sa\n", False),
        ("worker/x.py", "from shim.settings import ShimSettings\n", True),
        ("worker/x.py", "from ledger import calls\nfrom policies.gate import check_step\n", False),
        ("shim/x.py", "def f() -> None:\n    from worker import app\n", True),
        ("shim/x.py", "import vendor\n", True),
        ("vendor/x.py", "import contracts\n", True),
        ("worker/handlers/x.py", "from ..handlers import noop\n", False),
        ("opa_format/x.py", "from contracts import ErrorCode\n", False),
        ("opa_format/x.py", "from ledger import calls\n", True),
        ("opa_format/x.py", "import worker.app\n", True),
        ("shim/x.py", "from opa_format import read_archive\n", False),
        ("worker/x.py", "from opa_format import extract\n", False),
    ],
)
def test_self_check_cases(rel: str, text: str, bad: bool) -> None:
    assert bool(check_imports(from_text(text, rel))) is bad


# --- no cycles, and private means private --------------------------------------------------


def import_graph(sources: tuple[Source, ...]) -> dict[str, set[str]]:
    """module -> the product modules it imports (lazy imports count too). ``from p
    import m`` of a submodule ``m`` counts as importing ``p.m``; of any other name,
    as importing ``p`` (its ``__init__``)."""
    known = {s.module for s in sources}
    graph: dict[str, set[str]] = {s.module: set() for s in sources}
    for source in sources:
        for node in ast.walk(source.tree):
            names: list[str] = []
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [
                    f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in known else node.module
                    for a in node.names
                ]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            for name in names:
                found = name
                while found not in known and "." in found:
                    found = found.rsplit(".", 1)[0]
                if found in known and found != source.module:
                    graph[source.module].add(found)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_import_cycle_anywhere() -> None:
    found = cycles(import_graph(product_sources(CHECKED)))
    assert found == [], "modules that import each other (lazily or not):\n" + "\n".join(
        " ↔ ".join(c) for c in found
    )


def test_self_check_a_lazy_cycle_is_a_cycle() -> None:
    sources = (
        from_text("from shim import b\n", "shim/a.py"),
        from_text("def f() -> None:\n    from shim.a import x\n", "shim/b.py"),
        from_text("import shim.a\n", "shim/c.py"),
    )
    assert cycles(import_graph(sources)) == [["shim.a", "shim.b"]]


def _private(parts: list[str]) -> bool:
    return any(p.startswith("_") and not p.startswith("__") for p in parts)


def private_imports(source: Source) -> list[tuple[int, str]]:
    """(line, module) for each import of a private module of a package other than
    the importer's own (ours or a third party's)."""
    out: list[tuple[int, str]] = []
    for line, target in imported_modules(source):
        parts = target.split(".")
        if parts[0] != source.package and _private(parts[1:]):
            out.append((line, target))
    return out


# Imports of another package's private module: each with the reason nothing public
# does, and all of them in the one module that adapts DBOS (a stale entry fails too).
PRIVATE_ALLOWED: dict[tuple[str, str], str] = {
    ("worker/durable/_dbos.py", "dbos._datasource"): "a step's checkpoint in our transaction",
    ("worker/durable/_dbos.py", "dbos._error"): "what DBOS raises in a workflow found cancelled",
    ("worker/durable/_dbos.py", "dbos._serialization"): "a checkpoint written as DBOS writes it",
    ("worker/durable/_dbos.py", "dbos._core"): "dequeue_now: the queue thread's dispatch",
    ("worker/durable/_dbos.py", "dbos._dbos"): "the DBOS instance; its jobs thread at launch",
    ("worker/durable/_dbos.py", "dbos._utils"): "dequeue_now: executor id, version, internal queue",
    ("worker/durable/_dbos.py", "dbos._sys_db"): "dequeue_now: the queue settings it holds",
    ("worker/durable/_dbos.py", "dbos._workflow_commands"): "DBOS's jobs thread, its sweep batch",
    ("worker/durable/_dbos.py", "dbos._queue"): "quiet_background: DBOS's default poll",
}


def test_private_modules_are_imported_only_by_their_own_package() -> None:
    found = {
        (s.rel, target): line
        for s in product_sources(CHECKED)
        for line, target in private_imports(s)
    }
    unexpected = sorted(k for k in found if k not in PRIVATE_ALLOWED)
    assert unexpected == [], "private modules of other packages:\n" + "\n".join(
        f"  {rel}:{found[(rel, t)]}: {t}" for rel, t in unexpected
    )
    stale = sorted(k for k in PRIVATE_ALLOWED if k not in found)
    assert stale == [], f"allowed but no longer imported (take them off the list): {stale}"


def test_the_benchmarks_reach_gatehouse_through_its_facades() -> None:
    """``bench`` measures the product as a user of it: through each package's
    ``__init__``, never a private module (one it needs is made public instead)."""
    found = [
        f"  {s.rel}:{line}: {target}"
        for s in product_sources(("bench",))
        for line, target in private_imports(s)
        if target.split(".")[0] in OURS
    ]
    assert found == [], "private modules of Gatehouse's packages:\n" + "\n".join(found)


def test_each_third_party_private_api_is_reached_from_one_module_per_program() -> None:
    by_library: dict[tuple[str, str], set[str]] = {}
    for s in product_sources(CHECKED):
        for _line, target in private_imports(s):
            library = target.split(".")[0]
            if library not in OURS:
                by_library.setdefault((s.package, library), set()).add(s.rel)
    spread = {k: sorted(v) for k, v in by_library.items() if len(v) > 1}
    assert spread == {}, f"a library's private API reached from several modules: {spread}"


@pytest.mark.parametrize(
    ("rel", "text", "found"),
    [
        ("worker/x.py", "from contracts._json import JsonObject\n", ["contracts._json"]),
        ("contracts/x.py", "from contracts._json import JsonObject\n", []),
        ("ledger/x.py", "from dbos._client import X\n", ["dbos._client"]),
        ("ledger/x.py", "from dbos import DBOS\n", []),
        ("shim/x.py", "import ledger.__init__\n", []),
    ],
)
def test_self_check_private_imports(rel: str, text: str, found: list[str]) -> None:
    assert [t for _, t in private_imports(from_text(text, rel))] == found
