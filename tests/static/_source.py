"""What the static policy checks read: the product's Python files, parsed once.

Every checker in ``tests/static`` is a pure function over one parsed source
(``Source``) that returns ``Finding``s, so each can also be run on a small
in-memory string in a self-check and shown to catch what it claims to.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from functools import cache
from pathlib import Path

__all__ = [
    "PRODUCT_PACKAGES",
    "REPO_ROOT",
    "Finding",
    "Source",
    "from_text",
    "product_sources",
    "report",
]

REPO_ROOT = Path(__file__).resolve().parents[2]
PRODUCT_PACKAGES = ("contracts", "shim", "worker", "ledger", "policies", "opa_format")


@dataclass(frozen=True)
class Finding:
    rel: str  # path relative to the repo root, posix spelling
    line: int
    what: str

    def __str__(self) -> str:
        return f"{self.rel}:{self.line}: {self.what}"


@dataclass(frozen=True)
class Source:
    rel: str
    module: str  # dotted module name, e.g. "worker.handlers.http"
    is_package: bool  # an __init__.py
    text: str
    tree: ast.Module

    @property
    def package(self) -> str:
        return self.module.split(".")[0]


def _module_name(rel: str) -> tuple[str, bool]:
    parts = rel.removesuffix(".py").split("/")
    if parts[-1] == "__init__":
        return ".".join(parts[:-1]), True
    return ".".join(parts), False


def from_text(text: str, rel: str) -> Source:
    """Parse ``text`` as if it were the file ``rel`` (used by the self-checks too)."""
    module, is_package = _module_name(rel)
    return Source(rel, module, is_package, text, ast.parse(text, filename=rel))


@cache
def _sources(packages: tuple[str, ...]) -> tuple[Source, ...]:
    out: list[Source] = []
    for package in packages:
        root = REPO_ROOT / package
        assert root.is_dir(), f"product package {package!r} not found at {root}"
        for path in sorted(root.rglob("*.py")):
            if "__pycache__" in path.parts:
                continue
            rel = path.relative_to(REPO_ROOT).as_posix()
            out.append(from_text(path.read_text(encoding="utf-8"), rel))
    return tuple(out)


def product_sources(packages: tuple[str, ...] = PRODUCT_PACKAGES) -> tuple[Source, ...]:
    return _sources(packages)


def report(title: str, findings: list[Finding]) -> str:
    lines = [f"{title} ({len(findings)}):", *(f"  {f}" for f in findings)]
    return "\n".join(lines)
