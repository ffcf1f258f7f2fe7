"""Every name the product writes as an actor is reserved (``contracts.identities``).

An actor field is one a person's identity also fills: ``decided_by``,
``requested_by``, ``cancelled_by``, ``executor_id`` and the rest of ``ACTOR_FIELDS``.
Wherever the product gives one a literal (a keyword argument, a dict key, a field
default, an assignment, the fallback of ``.get``), the literal, or an f-string's
leading text, must be a reserved name or begin with a reserved prefix: else a person
could take that name and read, on every record, as Gatehouse itself.
"""

from __future__ import annotations

import ast

from contracts import reserved_identity
from tests.static._source import Finding, Source, from_text, product_sources, report

ACTOR_FIELDS = frozenset(
    {
        "actor",
        "approved_by",
        "cancelled_by",
        "decided_by",
        "edited_by",
        "endorsed_by",
        "executor_id",
        "forked_by",
        "identity",
        "rejected_by",
        "requested_by",
        "resolved_by",
        "sent_by",
        "submitted_by",
    }
)


def _literal(value: ast.expr) -> str | None:
    """The text a value begins with when the source spells it out."""
    if isinstance(value, ast.Constant) and isinstance(value.value, str):
        return value.value
    if isinstance(value, ast.JoinedStr) and value.values:
        first = value.values[0]
        if isinstance(first, ast.Constant) and isinstance(first.value, str):
            return first.value
    if (  # settings.get("GATEHOUSE_EXECUTOR_ID", f"worker-{host}")
        isinstance(value, ast.Call)
        and isinstance(value.func, ast.Attribute)
        and value.func.attr == "get"
        and len(value.args) == 2
    ):
        return _literal(value.args[1])
    return None


def _actor_values(node: ast.AST) -> list[tuple[str, ast.expr]]:
    if isinstance(node, ast.keyword) and node.arg in ACTOR_FIELDS:
        return [(node.arg, node.value)]
    if isinstance(node, ast.Dict):
        return [
            (k.value, v)
            for k, v in zip(node.keys, node.values, strict=True)
            if isinstance(k, ast.Constant) and k.value in ACTOR_FIELDS
        ]
    if (
        isinstance(node, ast.AnnAssign)
        and isinstance(node.target, ast.Name)
        and node.target.id in ACTOR_FIELDS
        and node.value is not None
    ):
        return [(node.target.id, node.value)]
    if isinstance(node, ast.Assign):
        named = [t.id for t in node.targets if isinstance(t, ast.Name) and t.id in ACTOR_FIELDS]
        return [(n, node.value) for n in named]
    return []


def unreserved_actors(source: Source) -> list[Finding]:
    found = []
    for node in ast.walk(source.tree):
        for field, value in _actor_values(node):
            text = _literal(value)
            if text is not None and reserved_identity(text) is None:
                found.append(
                    Finding(source.rel, value.lineno, f"{field} = {text!r} is not reserved")
                )
    return found


def test_the_check_catches_an_actor_name_that_is_not_reserved() -> None:
    bad = from_text(
        'record(decided_by="robot")\n'
        'x = {"requested_by": f"reaper:{n}"}\n'
        "class B:\n    sent_by: str = 'bot'\n"
        'executor_id = env.get("ID", f"shim-{host}")\n',
        "worker/x.py",
    )
    assert sorted(f.line for f in unreserved_actors(bad)) == [1, 2, 4, 5]
    good = from_text(
        'record(decided_by=f"policy:{p}", requested_by="dbos", executor_id=who.name)\n'
        'x = {"cancelled_by": "dbos"}\nclass B:\n    sent_by: str = "anonymous"\n'
        'executor_id = env.get("ID", f"worker-{host}")\n',
        "worker/x.py",
    )
    assert unreserved_actors(good) == []


def test_every_actor_name_the_product_writes_is_reserved() -> None:
    findings = [f for s in product_sources() for f in unreserved_actors(s)]
    assert not findings, report(
        "actor names no identity may take, missing from contracts/identities.py", findings
    )


def test_the_names_the_product_writes_are_found() -> None:
    """The scan sees the writes the declaration names (a scan that found nothing
    would pass the test above for the wrong reason)."""
    seen = {
        _literal(value)
        for s in product_sources()
        for node in ast.walk(s.tree)
        for _, value in _actor_values(node)
    }
    assert {"policy:", "dbos", "gatehouse-shim", "anonymous", "worker-"} <= seen
