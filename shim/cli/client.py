"""The CLI's side of the API client: the client itself is :mod:`shim.client`; here,
how the CLI prints what it answers."""

from __future__ import annotations

from pydantic import BaseModel

from contracts import CallView, EpisodeView, ExplainView, JsonValue
from shim.client import KEEPALIVE, ApiError, ArtifactRef, Client

__all__ = ["KEEPALIVE", "ApiError", "ArtifactRef", "Client", "dump", "explain_text"]


def dump(value: BaseModel | list[CallView] | list[EpisodeView]) -> JsonValue:
    """JSON for printing: a model or a list of models."""
    if isinstance(value, list):
        return [v.model_dump(mode="json") for v in value]
    out: JsonValue = value.model_dump(mode="json")
    return out


def explain_text(view: ExplainView) -> str:
    """An explain report for a terminal: headline, summary, step notes, concerns, source."""
    report = view.report
    lines = [report.headline, "", report.summary]
    if report.steps:
        lines += ["", "Steps:"] + [f"  {n.step_id}: {n.note}" for n in report.steps]
    if report.concerns:
        lines += ["", "Concerns:"] + [f"  - {c}" for c in report.concerns]
    source = "recorded earlier, served from the ledger" if view.from_ledger else "new"
    lines += [
        "",
        f"(model {view.model}; ledger entry {view.op_key[:12]}, attempt {view.attempt}; {source})",
    ]
    return "\n".join(lines)
