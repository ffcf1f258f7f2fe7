"""No product module spells a path under ``var/`` except as a named default.

``gatehouse up --var X`` (and the demo's ``--dir``) must move every file the
stack keeps; a path under ``var/`` written inline where a file is opened would
stay behind in ``./var`` whatever ``--var`` says. So each such path is a
module-level ``DEFAULT_…`` constant (the folder itself once, ``shim.stackfile.
DEFAULT_VAR``), which a setting reads from its variable and ``up`` relocates
(``tests/unit/shim/test_var_dir.py`` holds every setting to that).
"""

from __future__ import annotations

import ast
import re

import pytest

from tests.static._source import Finding, Source, from_text, product_sources, report

# A string that is a path in ./var: "var", "var/", "var/anchors.jsonl", "var/" in an f-string.
_VAR_PATH = re.compile(r"var(/[\w.-]*)*")


def _named_defaults(tree: ast.Module) -> set[int]:
    """The ids of every string constant inside a module-level ``DEFAULT_… = …``."""
    allowed: set[int] = set()
    for node in tree.body:
        target = node.targets[0] if isinstance(node, ast.Assign) else None
        if isinstance(node, ast.AnnAssign):
            target = node.target
        if isinstance(target, ast.Name) and target.id.startswith("DEFAULT_"):
            value = node.value if isinstance(node, ast.Assign | ast.AnnAssign) else None
            if value is not None:
                allowed |= {id(n) for n in ast.walk(value) if isinstance(n, ast.Constant)}
    return allowed


def var_paths(source: Source) -> list[Finding]:
    allowed = _named_defaults(source.tree)
    return [
        Finding(source.rel, node.lineno, f"{node.value!r}: name it as a DEFAULT_ constant")
        for node in ast.walk(source.tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and _VAR_PATH.fullmatch(node.value)
        and id(node) not in allowed
    ]


def test_no_product_module_hard_codes_a_path_under_var() -> None:
    findings = [f for source in product_sources() for f in var_paths(source)]
    assert not findings, report("paths under var/ outside a named default", findings)


@pytest.mark.parametrize(
    ("text", "caught"),
    [
        ('DEFAULT_X = "var/x.jsonl"\n', False),
        ('DEFAULT_VAR = Path("var")\n', False),
        ('open("var/anchors.jsonl")\n', True),
        ('p.add_argument("--var", default="var")\n', True),
        ('root = Path("var") / "workspaces"\n', True),
        ('path = f"var/{name}.log"\n', True),
        ('def f():\n    DEFAULT_Y = "var/y"\n', True),  # not module level
        ('HELP = "logs go to var/ unless --var says"\n', False),  # prose, not a path
    ],
)
def test_self_check(text: str, caught: bool) -> None:
    assert bool(var_paths(from_text(text, "shim/x.py"))) is caught
