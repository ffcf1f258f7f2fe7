"""The shim's layout: which of its sub-packages may import which, checked over the AST.

    api     the HTTP API            may import tokens, and the top-level modules
    cli     the gatehouse command   may import tokens, local, client, and the top-level
                                    modules (NEVER api)
    client  the Python API client   the top-level modules only (a user's program imports
                                    it: never the api, the cli or a local stack)
    local   the local stack         may import tokens, and the top-level modules
                                    (never api, never cli)
    tokens  identities and tokens   nothing else of the shim

    top-level modules: ``shim`` (the version) and ``shim.settings``; they import
    no sub-package.

Every ``import`` counts, wherever it is (module level, inside a function,
under ``if TYPE_CHECKING:``), as in ``test_import_boundaries.py``. Besides the
table: a sub-package is used through its ``__init__`` or its public modules,
never another's ``_private`` module; there is no import cycle anywhere in the
shim; ``create_app`` only composes (every route comes from a router); every
API route takes its caller from ``require``; the CLI's registry is one literal
dict of command module names (imported when named), dispatched one level deep.
"""

from __future__ import annotations

import ast
from types import ModuleType

import pytest
from fastapi.routing import APIRoute

from shim.api import create_app, dashboard, routes, slack
from shim.api.http import served_routes
from shim.cli import COMMANDS
from shim.cli.commands import load
from shim.settings import ShimSettings
from tests.static._source import REPO_ROOT, Finding, Source, from_text, product_sources, report

MAY_IMPORT: dict[str, frozenset[str]] = {
    "api": frozenset({"tokens"}),
    "cli": frozenset({"tokens", "local", "client"}),
    "client": frozenset(),
    "local": frozenset({"tokens"}),
    "tokens": frozenset(),
}
# Modules at the top of the package, shared by every sub-package but tokens.
TOP_LEVEL = frozenset({"shim", "shim.settings", "shim.stackfile"})
MAY_IMPORT_TOP_LEVEL = frozenset({"api", "cli", "client", "local"})


def _imports(source: Source) -> list[tuple[int, str, tuple[str, ...]]]:
    """(line, module named, names taken from it) for every absolute import of the shim."""
    out: list[tuple[int, str, tuple[str, ...]]] = []
    for node in ast.walk(source.tree):
        if isinstance(node, ast.Import):
            out.extend((node.lineno, a.name, ()) for a in node.names if _ours(a.name))
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # the shim imports absolutely; a relative import is reported
                out.append((node.lineno, "<relative>", ()))
            elif _ours(node.module or ""):
                out.append((node.lineno, node.module or "", tuple(a.name for a in node.names)))
    return out


def _ours(module: str) -> bool:
    return module == "shim" or module.startswith("shim.")


def _sub(module: str) -> str | None:
    """The sub-package a shim module belongs to; None for a top-level module."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and module not in TOP_LEVEL else None


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def check_layout(source: Source) -> list[Finding]:
    """Imports the sub-package table forbids, and private modules reached across it."""
    here = _sub(source.module)
    findings: list[Finding] = []
    for line, target, names in _imports(source):
        if target == "<relative>":
            findings.append(Finding(source.rel, line, "a relative import: write shim.… in full"))
            continue
        there = _sub(target)
        if there is None:
            if here is not None and here not in MAY_IMPORT_TOP_LEVEL:
                findings.append(Finding(source.rel, line, f"shim.{here} imports {target}"))
        elif here is None:
            findings.append(Finding(source.rel, line, f"{source.module} imports {target}"))
        elif there != here and there not in MAY_IMPORT[here]:
            may = ", ".join(sorted(MAY_IMPORT[here])) or "no other sub-package"
            what = f"shim.{here} imports {target} (shim.{here} may import {may})"
            findings.append(Finding(source.rel, line, what))
        if there != here:
            inner = target.split(".")[2:] + list(names)
            if any(_private(part) for part in inner):
                shown = f"{target} ({', '.join(names)})" if names else target
                what = f"imports {shown}: a private part of shim.{there} from outside it"
                findings.append(Finding(source.rel, line, what))
    return findings


def _edges(sources: tuple[Source, ...]) -> dict[str, set[str]]:
    """Module → the shim modules it imports (``from a import b``: a.b when b is a module)."""
    modules = {s.module for s in sources}
    graph: dict[str, set[str]] = {s.module: set() for s in sources}
    for source in sources:
        for _, target, names in _imports(source):
            if target == "<relative>":
                continue
            wanted = [f"{target}.{n}" for n in names if f"{target}.{n}" in modules] or [target]
            for name in wanted:
                module = name
                while module not in modules and "." in module:
                    module = module.rpartition(".")[0]
                if module in modules and module != source.module:
                    graph[source.module].add(module)
    return graph


def cycles(sources: tuple[Source, ...]) -> list[list[str]]:
    """Every group of modules that import each other, round and round (Tarjan's SCCs)."""
    graph = _edges(sources)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group: list[str] = []
            while True:
                member = stack.pop()
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def registers_routes(source: Source) -> list[Finding]:
    """Routes declared on the app itself (``@app.get``, ``app.add_api_route``, …)."""
    verbs = {"get", "post", "put", "patch", "delete", "head", "options", "trace", "api_route"}
    verbs |= {"route", "websocket", "add_api_route", "add_route", "add_websocket_route"}
    findings: list[Finding] = []
    for node in ast.walk(source.tree):
        if (
            isinstance(node, ast.Attribute)
            and node.attr in verbs
            and isinstance(node.value, ast.Name)
            and node.value.id == "app"
        ):
            findings.append(
                Finding(source.rel, node.lineno, f"app.{node.attr}: a route on the app")
            )
    return findings


def _source(rel: str) -> Source:
    return from_text((REPO_ROOT / rel).read_text(encoding="utf-8"), rel)


# --- the shim as it is -------------------------------------------------------------------------


def test_every_shim_module_belongs_to_the_table() -> None:
    for source in product_sources(("shim",)):
        sub = _sub(source.module)
        assert sub in MAY_IMPORT or source.module in TOP_LEVEL, source.rel


def test_sub_packages_import_only_what_the_table_allows() -> None:
    findings = [f for s in product_sources(("shim",)) for f in check_layout(s)]
    if findings:
        pytest.fail(report("shim imports across its layout", findings), pytrace=False)


def test_no_import_cycle_in_the_shim() -> None:
    assert cycles(product_sources(("shim",))) == []


def test_tests_and_benchmarks_use_no_private_shim_module() -> None:
    findings: list[Finding] = []
    for folder in ("tests", "bench"):
        for path in sorted((REPO_ROOT / folder).rglob("*.py")):
            rel = path.relative_to(REPO_ROOT).as_posix()
            source = from_text(path.read_text(encoding="utf-8"), rel)
            for line, target, names in _imports(source):
                parts = target.split(".")[1:] + list(names)
                if target != "<relative>" and any(_private(p) for p in parts):
                    findings.append(Finding(rel, line, f"imports {target} {names}"))
    assert not findings, report("private shim modules used from outside", findings)


def _is_docstring(node: ast.stmt) -> bool:
    return isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)


def test_the_package_holds_only_the_version() -> None:
    tree = _source("shim/__init__.py").tree
    body = [
        n for n in tree.body if not (isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant))
    ]
    assert len(body) == 1 and isinstance(body[0], ast.Assign)
    assert [t.id for t in body[0].targets if isinstance(t, ast.Name)] == ["__version__"]


def test_create_app_only_composes() -> None:
    assert registers_routes(_source("shim/api/app.py")) == []
    app = create_app(ShimSettings.from_env({}))
    own = {"/openapi.json", "/docs", "/docs/oauth2-redirect", "/redoc"}  # FastAPI's
    served = {
        (r.path, frozenset(r.methods or ()), r.endpoint)
        for r in served_routes(app)
        if isinstance(r, APIRoute) and r.path not in own
    }
    routers = (*routes.ROUTERS, *dashboard.ROUTERS, *slack.ROUTERS)
    declared = {
        (r.path, frozenset(r.methods or ()), r.endpoint)
        for router in routers
        for r in router.routes
        if isinstance(r, APIRoute)
    }
    assert served == declared
    assert len(served) > 40


@pytest.mark.parametrize(
    ("package", "listed", "skip"),
    [(routes, routes.ROUTERS, ()), (dashboard, dashboard.ROUTERS, ("session",))],
    ids=["api", "dashboard"],
)
def test_one_router_per_module_each_included(
    package: ModuleType, listed: tuple[object, ...], skip: tuple[str, ...]
) -> None:
    folder = REPO_ROOT.joinpath(*package.__name__.split("."))
    modules = sorted(
        p.stem for p in folder.glob("*.py") if not p.stem.startswith("_") and p.stem not in skip
    )
    for name in modules:
        module = getattr(package, name, None)
        assert module is not None, f"{package.__name__}.{name} is not imported by its package"
        assert getattr(module, "router", None) in listed, f"{module.__name__}.router is not listed"
    assert len(listed) == len(modules)


def test_every_api_route_takes_its_caller_from_require() -> None:
    public = {"/healthz", "/readyz", "/auth/oidc", "/auth/oidc/exchange"}
    for router in routes.ROUTERS:
        for route in router.routes:
            assert isinstance(route, APIRoute)
            callers = [
                d.call
                for d in route.dependant.dependencies
                if getattr(d.call, "__qualname__", "") == "require.<locals>.caller"
            ]
            assert (len(callers) == 1) is (route.path not in public), route.path
    for source in product_sources(("shim",)):
        if source.module.startswith("shim.api.routes."):
            names = {n for _, _, taken in _imports(source) for n in taken}
            assert not names & {"bearer", "TokenStore", "LiveTokens"}, source.rel


def test_the_cli_registry_is_one_literal_dict_dispatched_one_level() -> None:
    """``COMMANDS`` is one literal dict of ``CommandInfo(module, HELP)``, both string
    literals; each names the module of its command (``mcp-pin``: ``….mcp_pin``) and every
    module of ``shim/cli/commands/`` is named. ``load`` is the one place a module is
    imported by name, and only by the registry's; ``main`` runs what ``load`` gives."""
    source = _source("shim/cli/commands/__init__.py")
    [literal] = [
        n.value
        for n in source.tree.body
        if isinstance(n, ast.AnnAssign | ast.Assign)
        and "COMMANDS" in ast.unparse(n.target if isinstance(n, ast.AnnAssign) else n.targets[0])
    ]
    assert isinstance(literal, ast.Dict)
    keys = [k.value for k in literal.keys if isinstance(k, ast.Constant)]
    assert keys == list(COMMANDS)
    for key, value in zip(keys, literal.values, strict=True):
        assert isinstance(value, ast.Call) and ast.unparse(value.func) == "CommandInfo", key
        assert not value.keywords and len(value.args) == 2, key
        assert all(isinstance(a, ast.Constant) and isinstance(a.value, str) for a in value.args)
    package = REPO_ROOT / "shim" / "cli" / "commands"
    modules = {p.stem for p in package.glob("*.py")} - {"__init__"}
    assert {info.module for info in COMMANDS.values()} == {
        f"shim.cli.commands.{m}" for m in modules
    }
    for name, info in COMMANDS.items():
        assert info.module == "shim.cli.commands." + name.replace("-", "_"), name
        assert info.HELP.strip(), name
        command = load(name)
        assert callable(command.add_arguments) and callable(command.run), name
    calls = [
        n
        for n in ast.walk(source.tree)
        if isinstance(n, ast.Call) and ast.unparse(n.func) == "import_module"
    ]
    assert [ast.unparse(c) for c in calls] == ["import_module(COMMANDS[name].module)"]
    main = _source("shim/cli/_main.py").text
    assert "load(args.command).run(args)" in main


# --- self-checks: the checkers catch what they claim to ----------------------------------------

BAD_CLI = """
from __future__ import annotations
from typing import TYPE_CHECKING
from shim.tokens import Identity
from shim.local import start_shim
from shim.settings import ShimSettings
if TYPE_CHECKING:
    from shim.api.services import Service

def later() -> None:
    import shim.api.app
    from shim.local._procs import stop
    from shim.local import _procs
"""


def test_self_check_catches_the_table_and_private_imports() -> None:
    found = check_layout(from_text(BAD_CLI, "shim/cli/x.py"))
    assert sorted(f.line for f in found) == [8, 11, 12, 13]
    assert "private" in found[-1].what and "private" in found[-2].what


@pytest.mark.parametrize(
    ("rel", "text", "bad"),
    [
        ("shim/local/x.py", "from shim.api import create_app\n", True),
        ("shim/local/x.py", "def f() -> None:\n    from shim.cli import main\n", True),
        ("shim/local/x.py", "from shim.tokens import add_token\n", False),
        ("shim/tokens/x.py", "from shim.settings import ShimSettings\n", True),
        ("shim/tokens/x.py", "from shim.tokens._file import utc_now\n", False),
        ("shim/api/x.py", "from shim.cli.client import Client\n", True),
        ("shim/api/x.py", "from shim.api.services._x import y\n", False),
        ("shim/api/x.py", "from shim.tokens._store import bearer\n", True),
        ("shim/api/x.py", "from . import deps\n", True),
        ("shim/settings.py", "from shim.local import free_port\n", True),
        ("shim/cli/x.py", "from shim import __version__\n", False),
    ],
)
def test_self_check_cases(rel: str, text: str, bad: bool) -> None:
    assert bool(check_layout(from_text(text, rel))) is bad


def test_self_check_finds_a_cycle_even_through_a_lazy_import() -> None:
    sources = (
        from_text("from shim.cli.a import main\n", "shim/cli/__init__.py"),
        from_text("from shim.cli.b import x\n", "shim/cli/a.py"),
        from_text("def f() -> None:\n    from shim.cli import main\n", "shim/cli/b.py"),
        from_text("import shim.cli.a\n", "shim/cli/c.py"),
    )
    assert cycles(sources) == [["shim.cli", "shim.cli.a", "shim.cli.b"]]
    assert cycles(sources[1:]) == []  # without the package's own import of a: no cycle


def test_self_check_finds_a_route_on_the_app() -> None:
    text = "def create_app() -> None:\n    @app.get('/x')\n    def x() -> None: ...\n"
    assert [f.line for f in registers_routes(from_text(text, "shim/api/app.py"))] == [2]
    assert registers_routes(from_text("app.include_router(r)\n", "shim/api/app.py")) == []
