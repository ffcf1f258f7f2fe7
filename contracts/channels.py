"""Text channels (MOVA 4.1.1 ``global.text_channel_catalog_v1``).

Every text Gatehouse stores or returns belongs to exactly one channel:

* ``human_ui`` — written by or for people: objectives, plan titles, comments.
* ``model_instruction`` — guardrail text given to planners; never shown as human_ui.
* ``system_log`` — what machines said: tool output, error messages, episode summaries.
  Tool output is capped by the connector's ``max_output_bytes``.

Each response model names, by JSON Pointer pattern (``*`` is any array index or
key), which channel the text at each place belongs to. Responses carry that map as
``text_channels``; ``tests/integration/test_text_channels.py`` checks that no text
of one channel turns up anywhere else.
"""

from __future__ import annotations

from enum import StrEnum

__all__ = [
    "EPISODES_CHANNELS",
    "EXPLAIN_CHANNELS",
    "POLICY_CHANNELS",
    "RUN_VIEW_CHANNELS",
    "SECURITY_EVENTS_CHANNELS",
    "TextChannel",
]


class TextChannel(StrEnum):
    HUMAN_UI = "human_ui"
    MODEL_INSTRUCTION = "model_instruction"
    SYSTEM_LOG = "system_log"


RUN_VIEW_CHANNELS: dict[str, TextChannel] = {
    "/objective": TextChannel.HUMAN_UI,
    "/plan_card/plan/objective": TextChannel.HUMAN_UI,
    "/plan_card/plan/steps/*/title": TextChannel.HUMAN_UI,
    "/plan_card/plan/steps/*/input": TextChannel.HUMAN_UI,
    "/approvals/*/comment": TextChannel.HUMAN_UI,
    "/error_message": TextChannel.SYSTEM_LOG,
    "/steps/*/output": TextChannel.SYSTEM_LOG,
    "/steps/*/error_message": TextChannel.SYSTEM_LOG,
}
EPISODES_CHANNELS: dict[str, TextChannel] = {"/episodes/*/body": TextChannel.SYSTEM_LOG}
SECURITY_EVENTS_CHANNELS: dict[str, TextChannel] = {"/security_events/*": TextChannel.SYSTEM_LOG}
POLICY_CHANNELS: dict[str, TextChannel] = {
    "/content/description": TextChannel.HUMAN_UI,
    "/content/planner_instruction": TextChannel.MODEL_INSTRUCTION,
    "/content/connectors/*/description": TextChannel.HUMAN_UI,
}
# The explain report is written for people. The evidence it was written from was
# the model's input (model_instruction) and is never part of the response.
EXPLAIN_CHANNELS: dict[str, TextChannel] = {"/report": TextChannel.HUMAN_UI}
