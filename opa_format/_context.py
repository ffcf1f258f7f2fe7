"""What an archive asks of an agent: the context (system → history → prompt) and the mode rule.

Pure functions over a validated ``Archive``; the caller supplies the values of
the reserved template variables (the time included), so the same inputs give
the same objective.
"""

from __future__ import annotations

import json
import re
from typing import Literal

from pydantic import BaseModel, ConfigDict

from contracts import ErrorCode
from opa_format._model import Archive, ContentBlock, ExecutionMode, HistoryMessage
from opa_format._refuse import refuse

__all__ = [
    "RESERVED_VARIABLES",
    "ContextMessage",
    "TemplateVariables",
    "check_unsigned_allowed",
    "context_of",
    "objective_of",
    "render_prompt",
]

RESERVED_VARIABLES = ("archive_name", "extracted_path", "timestamp", "agent")
_TEMPLATE = re.compile(r"\{\{\s*(archive_name|extracted_path|timestamp|agent)\s*\}\}")


class TemplateVariables(BaseModel):
    """Values of the reserved ``{{…}}`` variables; other ``{{names}}`` are left as written."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    archive_name: str
    extracted_path: str
    timestamp: str
    agent: str


class ContextMessage(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    role: Literal["user", "assistant", "system", "tool"]
    content: str
    source: Literal["history", "prompt"]


def render_prompt(prompt: str, variables: TemplateVariables) -> str:
    values = variables.model_dump()
    return _TEMPLATE.sub(lambda m: str(values[m.group(1)]), prompt)


def _block_text(block: ContentBlock) -> str:
    if block.type == "text":
        return block.text or ""
    if block.type == "tool_use":
        return f"[tool_use {block.name}: {json.dumps(block.input, sort_keys=True)}]"
    if block.type == "tool_result":
        content = block.content
        return content if isinstance(content, str) else json.dumps(content, sort_keys=True)
    return f"[{block.type}: {block.path}]"


def _text(message: HistoryMessage) -> str:
    if isinstance(message.content, str):
        return message.content
    return "\n".join(_block_text(b) for b in message.content)


def context_of(archive: Archive, variables: TemplateVariables) -> list[ContextMessage]:
    """System messages first, then the rest of the history in order, then the prompt.

    Only the prompt is a template; history is a record and is passed as written.
    """
    messages = archive.history.messages if archive.history else []
    ordered = [m for m in messages if m.role == "system"] + [
        m for m in messages if m.role != "system"
    ]
    out = [ContextMessage(role=m.role, content=_text(m), source="history") for m in ordered]
    out.append(
        ContextMessage(
            role="user", content=render_prompt(archive.prompt, variables), source="prompt"
        )
    )
    return out


def objective_of(archive: Archive, variables: TemplateVariables) -> str:
    """The context as one text, each part under a heading naming its role."""
    parts = []
    for message in context_of(archive, variables):
        heading = "prompt" if message.source == "prompt" else message.role
        parts.append(f"### {heading}\n{message.content}")
    return "\n\n".join(parts)


def check_unsigned_allowed(
    archive: Archive, mode: ExecutionMode | None = None, *, allow_unsigned_autonomous: bool
) -> None:
    """Unsigned archives do not run autonomously unless the profile says so.

    ``mode`` is the resolved execution mode (default: the manifest's).
    """
    resolved = mode or archive.manifest.execution_mode
    if resolved == "autonomous" and not archive.signature.signed and not allow_unsigned_autonomous:
        refuse(
            ErrorCode.OPA_UNSIGNED_REFUSED,
            "an unsigned archive may not run in autonomous mode under this policy profile",
            mode=resolved,
        )
