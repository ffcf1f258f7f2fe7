"""Gatehouse's OpenTelemetry spans, beside the ones DBOS opens.

DBOS opens a span per workflow (a stretch of a run: ``operationUUID`` is its
workflow id) and per DBOS step (its child) when tracing is on
(``dbos-config.yaml``'s ``telemetry``, see ``ledger/_config_file.py``), and
makes each the current span. A ledgered call is no DBOS step (the ledger is
its checkpoint), so ``call_span`` opens its span, a child of the current one,
named and attributed after OpenTelemetry's GenAI conventions: a tool call is
``execute_tool <tool>`` with ``gen_ai.tool.name`` and ``gen_ai.tool.call.id``
(the op_key), a planner call ``chat <planner>``. ``annotate`` adds
``gatehouse.*`` attributes to the current span: the run, the step, the
attempt, the op_key. A record (``worker.durable._tx``) is no DBOS step either:
``step_span`` opens its span under its durable name. Off, they do nothing.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from opentelemetry import trace

__all__ = ["annotate", "call_span", "set_tracing", "step_span"]

_on = [False]


def set_tracing(on: bool) -> None:
    _on[0] = on


def annotate(**attributes: str | int | None) -> None:
    if not _on[0]:
        return
    span = trace.get_current_span()
    if not span.get_span_context().is_valid:
        return
    for name, value in attributes.items():
        if value is not None:
            span.set_attribute(f"gatehouse.{name}", value)


@contextmanager
def call_span(kind: str, target: str, op_key: str) -> Iterator[None]:
    """The span of one ledgered call (``kind`` tool or provider), current while it runs."""
    if not _on[0]:
        yield
        return
    if kind == "tool":
        operation = "execute_tool"
        attributes = {"gen_ai.tool.name": target, "gen_ai.tool.call.id": op_key}
    else:
        operation = "chat"
        attributes = {"gen_ai.provider.name": target}
    tracer = trace.get_tracer("gatehouse")
    span = tracer.start_as_current_span(
        f"{operation} {target}", attributes={"gen_ai.operation.name": operation, **attributes}
    )
    with span:
        yield


@contextmanager
def step_span(name: str) -> Iterator[None]:
    """The span of one of a workflow's records (``name``: its durable step name)."""
    if not _on[0]:
        yield
        return
    with trace.get_tracer("gatehouse").start_as_current_span(name):
        yield
