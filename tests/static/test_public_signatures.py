"""No ``typing.Any`` in the signatures of public functions and methods.

Public means: the function's name does not start with ``_`` and neither does
the name of any class it is defined in. Functions nested inside functions
are local, not public. Every annotation counts (positional, keyword-only,
``*args``, ``**kwargs``, the return), including ``Any`` nested inside
another type (``dict[str, Any]``) and inside string annotations.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

import pytest

from tests.static._source import Finding, Source, from_text, product_sources, report

ANY_MODULES = frozenset({"typing", "typing_extensions"})

FunctionNode = ast.FunctionDef | ast.AsyncFunctionDef


def _any_spellings(tree: ast.Module) -> tuple[set[str], set[str]]:
    """(names bound to Any, names bound to the typing module) anywhere in the file."""
    any_names: set[str] = set()
    module_names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module in ANY_MODULES:
            any_names.update(
                alias.asname or alias.name for alias in node.names if alias.name == "Any"
            )
        elif isinstance(node, ast.Import):
            module_names.update(
                alias.asname or alias.name for alias in node.names if alias.name in ANY_MODULES
            )
    return any_names, module_names


def _mentions_any(annotation: ast.expr, any_names: set[str], module_names: set[str]) -> bool:
    for node in ast.walk(annotation):
        if isinstance(node, ast.Name) and node.id in any_names:
            return True
        if (
            isinstance(node, ast.Attribute)
            and node.attr == "Any"
            and isinstance(node.value, ast.Name)
            and node.value.id in module_names
        ):
            return True
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            try:
                parsed = ast.parse(node.value, mode="eval")
            except SyntaxError:
                continue
            if _mentions_any(parsed.body, any_names, module_names):
                return True
    return False


def _public_functions(body: list[ast.stmt], owner: str = "") -> Iterator[tuple[str, FunctionNode]]:
    for node in body:
        if isinstance(node, FunctionNode) and not node.name.startswith("_"):
            yield f"{owner}{node.name}", node
        elif isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
            yield from _public_functions(node.body, f"{owner}{node.name}.")
        elif isinstance(node, ast.If | ast.Try):
            # definitions under ``if sys.version_info...`` / ``try: ... except ImportError``
            yield from _public_functions(node.body, owner)
            yield from _public_functions(node.orelse, owner)


def check_signatures(source: Source) -> list[Finding]:
    any_names, module_names = _any_spellings(source.tree)
    if not any_names and not module_names:
        return []
    findings: list[Finding] = []
    for qualname, func in _public_functions(source.tree.body):
        args = func.args
        params = [*args.posonlyargs, *args.args, *args.kwonlyargs]
        if args.vararg is not None:
            params.append(args.vararg)
        if args.kwarg is not None:
            params.append(args.kwarg)
        for param in params:
            if param.annotation is not None and _mentions_any(
                param.annotation, any_names, module_names
            ):
                findings.append(
                    Finding(
                        source.rel,
                        param.lineno,
                        f"{qualname}(): parameter {param.arg!r} is annotated"
                        f" {ast.unparse(param.annotation)!r}",
                    )
                )
        if func.returns is not None and _mentions_any(func.returns, any_names, module_names):
            findings.append(
                Finding(
                    source.rel,
                    func.lineno,
                    f"{qualname}(): returns {ast.unparse(func.returns)!r}",
                )
            )
    return findings


def test_public_signatures_have_no_any() -> None:
    findings = [f for s in product_sources() for f in check_signatures(s)]
    if findings:
        pytest.fail(report("typing.Any in public signatures", findings), pytrace=False)


# --- self-checks ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "from typing import Any\ndef f(x: Any) -> None: ...\n",
        "from typing import Any\ndef f() -> Any: ...\n",
        "from typing import Any\ndef f(x: dict[str, list[Any]]) -> None: ...\n",
        "from typing import Any\ndef f(*args: Any) -> None: ...\n",
        "from typing import Any\ndef f(*, k: Any = 1) -> None: ...\n",
        "from typing import Any\ndef f(**kw: Any) -> None: ...\n",
        "from typing import Any\nasync def f(x: 'Any') -> None: ...\n",
        "from typing import Any as Whatever\ndef f(x: Whatever) -> None: ...\n",
        "import typing\ndef f(x: typing.Any) -> None: ...\n",
        "import typing as t\ndef f(x: 'dict[str, t.Any]') -> None: ...\n",
        "from typing import Any\nclass C:\n    def m(self, x: Any) -> None: ...\n",
        "from typing import Any\nclass C:\n    class D:\n        def m(self) -> Any: ...\n",
    ],
)
def test_self_check_catches_any(text: str) -> None:
    assert check_signatures(from_text(text, "ledger/bad.py")), text


@pytest.mark.parametrize(
    "text",
    [
        "from typing import Any\ndef _f(x: Any) -> None: ...\n",
        "from typing import Any\nclass _C:\n    def m(self, x: Any) -> None: ...\n",
        "from typing import Any\nclass C:\n    def __init__(self, x: Any) -> None: ...\n",
        "from typing import Any\ndef f() -> None:\n    def g(x: Any) -> None: ...\n",
        "from typing import Any\ndef f(x: object) -> None:\n    y: Any = x\n",
        "def f(x: 'Anything') -> None: ...\n",
    ],
)
def test_self_check_ignores_private_and_local(text: str) -> None:
    assert not check_signatures(from_text(text, "ledger/ok.py")), text


def test_self_check_reports_file_and_line() -> None:
    text = "from typing import Any\n\n\ndef f(\n    a: int,\n    b: Any,\n) -> None: ...\n"
    (finding,) = check_signatures(from_text(text, "policies/x.py"))
    assert str(finding) == "policies/x.py:6: f(): parameter 'b' is annotated 'Any'"
