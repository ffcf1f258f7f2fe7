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
