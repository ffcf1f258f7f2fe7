"""A driver kind is declared in its own places and branched on nowhere else.

Every kind has, and only these places name it:

* ``contracts/plan.py``: the ``DriverKind`` member and its ``KIND_SHAPES`` row (what
  its connector may declare);
* ``policies/kinds/<kind>.py``: its rules (input checks, taint positions, Cedar
  attributes, sentence and request on the plan card, read-only and outside-world
  answers, resending), listed in ``policies/kinds/__init__.py``'s ``KINDS``;
* ``worker/handlers/<kind>``: its handler, listed in ``worker/handlers/registry.py``.

Anywhere else a ``DriverKind.X`` member, or a comparison with a kind's name as a
string, is a branch on the kind that adding a kind would have to find: a finding.
The rest of the product asks ``policies.kinds.rules_of(kind)``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from contracts import KIND_SHAPES, DriverKind
from policies.kinds import KINDS
from tests.static._source import REPO_ROOT, Finding, Source, from_text, product_sources, report
from worker.handlers.registry import HANDLERS

# Where a kind may be named (a file, or a folder ending in "/").
DECLARED_IN = ("contracts/plan.py", "policies/kinds/", "worker/handlers/")
_NAMES = frozenset(k.value for k in DriverKind)


def _allowed(rel: str) -> bool:
    return any(rel == p or (p.endswith("/") and rel.startswith(p)) for p in DECLARED_IN)


def kind_branches(source: Source) -> list[Finding]:
    """Every place ``source`` names a particular kind: ``DriverKind.X``, or a kind's name
    as a string compared with something (``driver_kind == "opencode"``)."""
    found: list[Finding] = []
    for node in ast.walk(source.tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id == "DriverKind"
            and node.attr in DriverKind.__members__
        ):
            found.append(Finding(source.rel, node.lineno, f"DriverKind.{node.attr}"))
        elif isinstance(node, ast.Compare) and "driver_kind" in ast.unparse(node):
            # a kind's name as a string, held against something that is a driver kind
            # ("http" is also an ASGI scope type and a URL scheme: those are not kinds)
            for side in [node.left, *node.comparators]:
                if isinstance(side, ast.Constant) and side.value in _NAMES:
                    found.append(Finding(source.rel, node.lineno, f"compares with {side.value!r}"))
    return found


def test_no_branch_on_a_kind_outside_its_places() -> None:
    findings = [f for s in product_sources() if not _allowed(s.rel) for f in kind_branches(s)]
    if findings:
        pytest.fail(
            report(
                "a driver kind is branched on outside its places (ask policies.kinds.rules_of)",
                findings,
            ),
            pytrace=False,
        )


def _handler_path(kind: DriverKind) -> Path | None:
    for candidate in (f"{kind.value}.py", f"{kind.value}/__init__.py"):
        path = REPO_ROOT / "worker" / "handlers" / candidate
        if path.is_file():
            return path
    return None


def where_declared(kind: DriverKind) -> dict[str, str | None]:
    """Each place ``kind`` must be declared, with where it is (None: it is not)."""
    rules = KINDS.get(kind)
    rules_file = REPO_ROOT / "policies" / "kinds" / f"{kind.value}.py"
    handler = _handler_path(kind)
    return {
        "member": "contracts/plan.py" if kind in DriverKind else None,
        "connector shape": "contracts/plan.py KIND_SHAPES" if kind in KIND_SHAPES else None,
        "rules": f"policies/kinds/{kind.value}.py"
        if rules is not None
        and rules.kind is kind
        and rules_file.is_file()
        and type(rules).__module__ == f"policies.kinds.{kind.value}"
        else None,
        "rules listed": "policies/kinds/__init__.py KINDS" if rules is not None else None,
        "handler": None if handler is None else handler.relative_to(REPO_ROOT).as_posix(),
        "handler listed": "worker/handlers/registry.py HANDLERS" if kind in HANDLERS else None,
    }


@pytest.mark.parametrize("kind", list(DriverKind), ids=lambda k: k.value)
def test_every_kind_is_declared_in_each_of_its_places(kind: DriverKind) -> None:
    places = where_declared(kind)
    missing = [what for what, where in places.items() if where is None]
    shown = "\n".join(f"  {what}: {where or 'MISSING'}" for what, where in places.items())
    assert not missing, f"driver kind {kind.value!r}:\n{shown}"


def test_the_lists_name_no_kind_that_is_not_one() -> None:
    for listed in (KINDS, KIND_SHAPES, HANDLERS):
        assert set(listed) == set(DriverKind)


# --- self-checks ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "if step.driver_kind is DriverKind.HTTP:\n    pass\n",
        "x = {DriverKind.NOOP: 1}\n",
        "ok = raw.get('driver_kind') != 'mcp_proxy'\n",
        "agent = 'opencode' == record.driver_kind\n",
    ],
)
def test_self_check_finds_a_branch(text: str) -> None:
    assert kind_branches(from_text(text, "worker/somewhere.py")), text


@pytest.mark.parametrize(
    "text",
    [
        "rules = rules_of(step.driver_kind)\n",
        "kinds = list(DriverKind)\n",
        "label = 'opencode'\n",  # a name, not a comparison
        "asgi = scope['type'] != 'http'\n",  # not a driver kind
    ],
)
def test_self_check_passes_a_kind_neutral_line(text: str) -> None:
    assert not kind_branches(from_text(text, "worker/somewhere.py")), text


def test_self_check_places() -> None:
    assert _allowed("policies/kinds/http.py")
    assert _allowed("worker/handlers/opencode/engine.py")
    assert not _allowed("policies/gate.py")
    assert not _allowed("contracts/tool_pool.py")
