"""The benchmark's peers (LangGraph, its Postgres checkpointer, psycopg_pool) are
benchmark-only: no product package imports them, lazily or otherwise."""

from __future__ import annotations

from tests.static._source import Finding, product_sources, report
from tests.static.test_import_boundaries import imported_modules

PEERS = ("langgraph", "langchain", "langchain_core", "psycopg_pool")


def test_no_product_package_imports_a_benchmark_peer() -> None:
    findings = [
        Finding(source.rel, line, f"imports {target}")
        for source in product_sources()
        for line, target in imported_modules(source)
        if target.split(".")[0] in PEERS
    ]
    assert findings == [], report("benchmark-only peers imported by the product", findings)
