"""The explain skill: a ``human_ui`` report a model writes from a run's evidence only.

``ExplainReport`` (``ds.gatehouse_explain_report_v1``) is what the model must
answer with; every field is required and the object is closed, so the schema
can be sent as an OpenAI ``json_schema`` response format in strict mode.
``ExplainView`` is what ``GET /runs/{id}/explain`` returns: the report and
where it came from (its ledger entry), never the evidence itself.

The report is text for people. Nothing that plans or gates a run reads it
(``tests/static/test_explain_isolation.py``).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, StringConstraints

from contracts._base import Closed, Digest
from contracts.channels import EXPLAIN_CHANNELS, TextChannel

__all__ = ["EXPLAIN_REPORT_SCHEMA_ID", "ExplainReport", "ExplainStepNote", "ExplainView"]

EXPLAIN_REPORT_SCHEMA_ID = "ds.gatehouse_explain_report_v1"

# Report text: no NUL (PostgreSQL cannot store it), bounded so a rambling model
# cannot flood the ledger.
Headline = Annotated[str, StringConstraints(min_length=1, max_length=200, pattern=r"^[^\x00]*$")]
Paragraph = Annotated[str, StringConstraints(min_length=1, max_length=2000, pattern=r"^[^\x00]*$")]
StepRef = Annotated[str, StringConstraints(min_length=1, max_length=64, pattern=r"^[^\x00]*$")]


class ExplainStepNote(Closed):
    step_id: StepRef  # a step of the run's plan; a note on any other is refused
    note: Paragraph


class ExplainReport(Closed):
    """What the model answers with (channel ``human_ui``)."""

    headline: Headline
    summary: Paragraph
    steps: list[ExplainStepNote] = Field(max_length=200)
    concerns: list[Paragraph] = Field(max_length=20)


class ExplainView(Closed):
    """Body of ``GET /runs/{id}/explain``."""

    schema_id: Literal["ds.gatehouse_explain_v1"] = "ds.gatehouse_explain_v1"
    run_id: str
    report: ExplainReport
    report_digest: Digest
    # The ledger entry that holds the report: a provider call, step "@explain".
    op_key: Digest
    attempt: int = Field(ge=1)
    from_ledger: bool  # True: recorded earlier, no model was asked this time
    request_digest: Digest
    evidence_digest: Digest
    model: str
    text_channels: dict[str, TextChannel] = Field(default_factory=lambda: dict(EXPLAIN_CHANNELS))
