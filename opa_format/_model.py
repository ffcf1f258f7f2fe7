"""What a validated archive is: its manifest, history, entries and signature status."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue

from contracts import JsonObject

__all__ = [
    "Archive",
    "ContentBlock",
    "Entry",
    "ExecutionMode",
    "History",
    "HistoryMessage",
    "Manifest",
    "SignatureStatus",
    "Signer",
]

ExecutionMode = Literal["interactive", "batch", "autonomous"]
BlockType = Literal["text", "image", "file", "tool_use", "tool_result"]
Role = Literal["user", "assistant", "system", "tool"]


class Manifest(BaseModel):
    """The main section of ``META-INF/MANIFEST.MF``, with the spec's defaults applied."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    manifest_version: str = "1.0"
    opa_version: str = "0.1"
    prompt_file: str = "prompt.md"
    session_file: str = "session/history.json"
    data_root: str = "data/"
    execution_mode: ExecutionMode = "interactive"
    title: str | None = None
    description: str | None = None
    agent_hint: str | None = None
    created_by: str | None = None
    created_at: str | None = None
    schema_extensions: tuple[str, ...] = ()
    attributes: dict[str, str] = Field(default_factory=dict)
    """Every main attribute as written, known or not (unknown ones are kept on rewrite)."""


class ContentBlock(BaseModel):
    """One block of a message; the fields beside ``type`` depend on it."""

    model_config = ConfigDict(frozen=True, extra="allow")

    type: BlockType
    text: str | None = None
    path: str | None = None
    media_type: str | None = None
    id: str | None = None
    name: str | None = None
    input: JsonValue = None
    tool_use_id: str | None = None
    content: str | list[JsonValue] | None = None


class HistoryMessage(BaseModel):
    model_config = ConfigDict(frozen=True, extra="allow")

    role: Role
    content: str | list[ContentBlock]
    id: str | None = None
    timestamp: str | None = None
    metadata: dict[str, JsonValue] | None = None


class History(BaseModel):
    """``session/history.json`` (opa-archive 0.1.0 writes ``version`` for ``opa_version``)."""

    model_config = ConfigDict(frozen=True, extra="allow")

    opa_version: str | None = None
    version: str | None = None
    session_id: str | None = None
    created_at: str | None = None
    updated_at: str | None = None
    messages: list[HistoryMessage]


class Entry(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    size: int
    compressed_size: int
    sha256: str
    is_dir: bool


class Signer(BaseModel):
    """Who signed: the signer certificate and the trust store certificate that vouches for it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    subject: str
    issuer: str
    serial: str
    fingerprint_sha256: str
    not_before: str
    not_after: str
    trusted_by: str  # fingerprint of the trust store certificate (the signer's own, or its CA)


class SignatureStatus(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    signed: bool
    signer: Signer | None = None
    block: str | None = None  # e.g. META-INF/SIGNATURE.RSA
    digest_algorithm: str | None = None


@dataclass(frozen=True)
class Archive:
    """A validated archive. Only ``read_archive`` makes one; every field has been checked."""

    name: str  # the base name without .opa / .opa.jar (OPA_ARCHIVE_NAME)
    sha256: str  # of the archive file
    size: int
    manifest: Manifest
    prompt: str
    history: History | None
    entries: tuple[Entry, ...]
    signature: SignatureStatus
    data: bytes = field(repr=False, compare=False)

    def entry(self, name: str) -> Entry | None:
        return next((e for e in self.entries if e.name == name), None)

    def to_json(self) -> JsonObject:
        """What ``gatehouse opa inspect --json`` prints (no contents)."""
        return {
            "name": self.name,
            "sha256": self.sha256,
            "size": self.size,
            "manifest": self.manifest.model_dump(mode="json"),
            "signature": self.signature.model_dump(mode="json"),
            "prompt_bytes": len(self.prompt.encode("utf-8")),
            "history_messages": len(self.history.messages) if self.history else 0,
            "entries": [e.model_dump(mode="json") for e in self.entries],
            "total_size": sum(e.size for e in self.entries),
        }
