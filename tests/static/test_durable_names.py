"""Every durable name (workflow, step, topic, queue) comes from ``contracts.durable``.

DBOS matches a recovered workflow's history by these names, so a name written as
a literal somewhere else could drift from the registry and strand the runs in
flight. Checked over the AST: no product module but the registry holds one of
its names as a string, and every DBOS call that names a workflow or step takes
the name from the registry.
"""

from __future__ import annotations

import ast

import pytest

from contracts import DURABLE_NAMES, Step
from tests.static._source import Finding, Source, from_text, product_sources, report

REGISTRY = "contracts/durable.py"
# DBOS calls whose ``name`` (keyword, or "name" key of an options dict) is durable.
NAMING_CALLS = frozenset({"workflow", "step", "run_step", "run_tx_step", "transaction"})


def _literal_names(source: Source) -> list[Finding]:
    return [
        Finding(source.rel, node.lineno, f"the durable name {node.value!r} written as a literal")
        for node in ast.walk(source.tree)
        if isinstance(node, ast.Constant) and node.value in DURABLE_NAMES
    ]


def _named_by_literal(source: Source) -> list[Finding]:
    found: list[Finding] = []
    for node in ast.walk(source.tree):
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
            continue
        if node.func.attr not in NAMING_CALLS:
            continue
        named = [k.value for k in node.keywords if k.arg == "name"]
        for arg in node.args:
            if isinstance(arg, ast.Dict):
                named += [
                    v
                    for k, v in zip(arg.keys, arg.values, strict=True)
                    if isinstance(k, ast.Constant) and k.value == "name"
                ]
        found += [
            Finding(source.rel, n.lineno, f"{node.func.attr} named by a literal {n.value!r}")
            for n in named
            if isinstance(n, ast.Constant) and isinstance(n.value, str)
        ]
    return found


def check(source: Source) -> list[Finding]:
    if source.rel == REGISTRY:
        return []
    return _literal_names(source) + _named_by_literal(source)


def test_durable_names_are_written_once() -> None:
    findings = [f for s in product_sources() for f in check(s)]
    if findings:
        pytest.fail(report("durable names outside contracts/durable.py", findings), pytrace=False)


def test_the_registry_has_every_name_once() -> None:
    steps = [v for k, v in vars(Step).items() if k.isupper()]
    assert len(steps) == len(set(steps))
    assert all(n.startswith("gatehouse.") or n == "intentQ" for n in DURABLE_NAMES)


@pytest.mark.parametrize(
    ("text", "bad"),
    [
        ('DBOS.workflow(name="gatehouse.intent")(f)\n', True),
        ('DBOS.run_step({"name": "my.step"}, f, x)\n', True),
        ("DBOS.run_step({'name': Step.BEGIN}, f, x)\n", False),
        ('x = "gatehouse.tool_call"\n', True),
        ('log = logging.getLogger("gatehouse.worker")\n', False),
    ],
)
def test_self_check(text: str, bad: bool) -> None:
    assert bool(check(from_text(text, "worker/durable/_x.py"))) is bad
