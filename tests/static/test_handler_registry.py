"""The handler registry is static: a literal dict of ``DriverKind.X: module.run``.

``worker/handlers/registry.py`` must build ``HANDLERS`` from a dict display
(optionally wrapped in ``MappingProxyType``) whose keys are ``DriverKind``
members and whose values are the ``run`` function of a module (or package) in
``worker/handlers/`` imported from ``worker.handlers``. No comprehension, no
``**`` merging, no ``getattr``, no later mutation: what can run is what is
written there. A runtime cross-check confirms the imported mapping is exactly
the one written.
"""

from __future__ import annotations

import ast

import pytest

from contracts import DriverKind
from tests.static._source import REPO_ROOT, Finding, Source, from_text, report

REGISTRY_REL = "worker/handlers/registry.py"
HANDLERS_DIR = REPO_ROOT / "worker" / "handlers"
NOT_HANDLERS = frozenset({"__init__", "registry"})


def handler_modules() -> frozenset[str]:
    """Each handler: a public module of ``worker/handlers/``, or a package there (one
    whose engine has modules of its own, like ``opencode/``)."""
    modules = {
        p.stem
        for p in HANDLERS_DIR.glob("*.py")
        if p.stem not in NOT_HANDLERS and not p.stem.startswith("_") and p.is_file()
    }
    packages = {p.parent.name for p in HANDLERS_DIR.glob("*/__init__.py")}
    return frozenset(modules | packages)


def _imported_handler_modules(tree: ast.Module) -> dict[str, str]:
    """Local name -> module stem, for ``from worker.handlers import x [as y]``."""
    out: dict[str, str] = {}
    for node in tree.body:
        if (
            isinstance(node, ast.ImportFrom)
            and node.level == 0
            and node.module == "worker.handlers"
        ):
            for alias in node.names:
                out[alias.asname or alias.name] = alias.name
    return out


def _driver_kind_imported(tree: ast.Module) -> bool:
    return any(
        isinstance(node, ast.ImportFrom)
        and node.module in ("contracts", "contracts.plan")
        and any(a.name == "DriverKind" and a.asname is None for a in node.names)
        for node in tree.body
    )


def _literal_dict(value: ast.expr) -> ast.Dict | None:
    if isinstance(value, ast.Dict):
        return value
    if (
        isinstance(value, ast.Call)
        and (
            (isinstance(value.func, ast.Name) and value.func.id == "MappingProxyType")
            or (isinstance(value.func, ast.Attribute) and value.func.attr == "MappingProxyType")
        )
        and len(value.args) == 1
        and not value.keywords
        and isinstance(value.args[0], ast.Dict)
    ):
        return value.args[0]
    return None


def _targets_handlers(node: ast.AST) -> bool:
    """Whether an assignment-like node writes ``HANDLERS`` or an item/attribute of it."""
    targets: list[ast.expr] = []
    if isinstance(node, ast.Assign):
        targets = node.targets
    elif isinstance(node, ast.AnnAssign | ast.AugAssign):
        targets = [node.target]
    elif isinstance(node, ast.Delete):
        targets = node.targets
    for target in targets:
        for inner in ast.walk(target):
            if isinstance(inner, ast.Name) and inner.id == "HANDLERS":
                return True
    return False


def check_registry(source: Source, modules: frozenset[str]) -> tuple[list[Finding], set[str]]:
    """Findings, plus the driver kinds the literal maps (for the runtime cross-check)."""
    findings: list[Finding] = []
    mapped: set[str] = set()

    def add(node: ast.AST, what: str) -> None:
        findings.append(Finding(source.rel, getattr(node, "lineno", 1), what))

    if not _driver_kind_imported(source.tree):
        add(source.tree, "DriverKind is not imported from contracts at module level")
    handler_names = _imported_handler_modules(source.tree)

    writes = [node for node in ast.walk(source.tree) if _targets_handlers(node)]
    top_level = [
        node
        for node in source.tree.body
        if isinstance(node, ast.Assign | ast.AnnAssign)
        and _targets_handlers(node)
        and (
            (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name))
            or (isinstance(node, ast.Assign) and len(node.targets) == 1)
        )
    ]
    if len(top_level) != 1:
        add(source.tree, f"expected one module-level 'HANDLERS = ...', found {len(top_level)}")
        return findings, mapped
    definition = top_level[0]
    for node in writes:
        if node is not definition:
            add(node, "HANDLERS is written again after its definition")
    for node in ast.walk(source.tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id == "HANDLERS"
            and node.func.attr in ("update", "setdefault", "pop", "popitem", "clear", "__setitem__")
        ):
            add(node, f"HANDLERS.{node.func.attr}(...) mutates the registry")

    value = definition.value
    display = _literal_dict(value) if value is not None else None
    if display is None:
        add(definition, "HANDLERS is not built from a literal dict display")
        return findings, mapped

    for key, item in zip(display.keys, display.values, strict=True):
        if key is None:
            add(item, "'**' merging into HANDLERS: every entry must be written out")
            continue
        if not (
            isinstance(key, ast.Attribute)
            and isinstance(key.value, ast.Name)
            and key.value.id == "DriverKind"
        ):
            add(key, f"key {ast.unparse(key)!r} is not a DriverKind.X attribute")
        elif key.attr not in DriverKind.__members__:
            add(key, f"DriverKind has no member {key.attr!r}")
        elif key.attr in mapped:
            add(key, f"DriverKind.{key.attr} is mapped twice")
        else:
            mapped.add(key.attr)
        if not (
            isinstance(item, ast.Attribute)
            and isinstance(item.value, ast.Name)
            and item.attr == "run"
        ):
            add(item, f"value {ast.unparse(item)!r} is not a 'module.run' attribute")
            continue
        stem = handler_names.get(item.value.id)
        if stem is None:
            add(item, f"{item.value.id!r} is not imported with 'from worker.handlers import ...'")
        elif stem not in modules:
            add(item, f"worker/handlers/{stem}.py does not exist")
    return findings, mapped


def _registry_source() -> Source:
    return from_text((REPO_ROOT / REGISTRY_REL).read_text(encoding="utf-8"), REGISTRY_REL)


def test_handlers_is_a_literal_dict_of_handler_modules() -> None:
    findings, mapped = check_registry(_registry_source(), handler_modules())
    if findings:
        pytest.fail(report("HANDLERS is not a static literal registry", findings), pytrace=False)
    assert mapped, f"{REGISTRY_REL}: HANDLERS maps no driver kind"


def test_runtime_registry_is_exactly_the_literal() -> None:
    import worker.handlers as handlers_package
    from worker.handlers.registry import HANDLERS

    source = _registry_source()
    _, mapped = check_registry(source, handler_modules())
    names = _imported_handler_modules(source.tree)
    display = next(
        _literal_dict(node.value)
        for node in source.tree.body
        if isinstance(node, ast.Assign | ast.AnnAssign)
        and _targets_handlers(node)
        and node.value is not None
    )
    assert display is not None
    assert {kind.name for kind in HANDLERS} == mapped
    for key, item in zip(display.keys, display.values, strict=True):
        assert isinstance(key, ast.Attribute)
        assert isinstance(item, ast.Attribute)
        assert isinstance(item.value, ast.Name)
        module = getattr(handlers_package, names[item.value.id])
        assert HANDLERS[DriverKind[key.attr]] is module.run, (
            f"{REGISTRY_REL}:{key.lineno}: HANDLERS[DriverKind.{key.attr}] at runtime is not"
            f" {names[item.value.id]}.run"
        )


# --- self-checks ------------------------------------------------------------------------------

HEADER = """
from types import MappingProxyType
from contracts import DriverKind
from worker.handlers import http, noop
"""
MODULES = frozenset({"http", "noop"})


def _check(body: str) -> list[Finding]:
    findings, _ = check_registry(from_text(HEADER + body, REGISTRY_REL), MODULES)
    return findings


def test_self_check_accepts_the_literal_shape() -> None:
    assert not _check("HANDLERS = MappingProxyType({DriverKind.NOOP: noop.run})\n")
    assert not _check("HANDLERS = {DriverKind.NOOP: noop.run, DriverKind.HTTP: http.run}\n")


@pytest.mark.parametrize(
    "body",
    [
        "HANDLERS = {k: noop.run for k in DriverKind}\n",
        "HANDLERS = dict(noop=noop.run)\n",
        "HANDLERS = MappingProxyType({**EXTRA, DriverKind.NOOP: noop.run})\n",
        "HANDLERS = {'noop': noop.run}\n",
        "HANDLERS = {DriverKind.NOPE: noop.run}\n",
        "HANDLERS = {DriverKind.NOOP: getattr(noop, 'run')}\n",
        "HANDLERS = {DriverKind.NOOP: noop.execute}\n",
        "HANDLERS = {DriverKind.NOOP: shell.run}\n",
        "HANDLERS = {DriverKind.NOOP: noop.run, DriverKind.NOOP: http.run}\n",
        "HANDLERS = {DriverKind.NOOP: noop.run}\nHANDLERS[DriverKind.HTTP] = http.run\n",
        "HANDLERS = {DriverKind.NOOP: noop.run}\nHANDLERS.update(more)\n",
        "HANDLERS = load_plugins()\n",
        "X = 1\n",
    ],
)
def test_self_check_refuses_dynamic_shapes(body: str) -> None:
    assert _check(body), body


def test_self_check_module_must_exist() -> None:
    text = HEADER + "from worker.handlers import ghost\nHANDLERS = {DriverKind.NOOP: ghost.run}\n"
    findings, _ = check_registry(from_text(text, REGISTRY_REL), MODULES)
    assert any("ghost.py does not exist" in f.what for f in findings)
