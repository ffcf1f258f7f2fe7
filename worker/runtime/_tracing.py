"""Gatehouse's attributes on the OpenTelemetry spans DBOS opens.

DBOS opens a span per workflow (a run: ``operationUUID`` is the run id) and per
step (its child) when tracing is on (``dbos-config.yaml``'s ``telemetry``, see
``ledger/_config_file.py``), and makes each the current span. ``annotate``
adds ``gatehouse.*`` attributes to the current span: the run, the step, the
attempt, the op_key. Off, it does nothing.
"""

from __future__ import annotations

from opentelemetry import trace

__all__ = ["annotate", "set_tracing"]

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
