"""The path, query and header parameters several routes take, each declared once."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import Header, Path, Query

from contracts import RUN_ID_PATTERN

__all__ = [
    "ArchiveMode",
    "ArchiveName",
    "IdempotencyKey",
    "OpKey",
    "PolicyId",
    "QueryId",
    "RunId",
    "Sha256",
]

RunId = Annotated[str, Path(pattern=f"^{RUN_ID_PATTERN}$")]
Sha256 = Annotated[str, Path(pattern=r"^[0-9a-f]{64}$")]
OpKey = Annotated[str, Path(pattern=r"^[0-9a-f]{64}$")]
PolicyId = Annotated[str, Path(pattern=r"^[a-z0-9][a-z0-9._:-]{0,63}$")]
IdempotencyKey = Annotated[
    str | None, Header(alias="Idempotency-Key", pattern=r"^[A-Za-z0-9._:-]{1,128}$")
]
# Query parameters of an archive upload to POST /intent.
ArchiveName = Annotated[
    str | None, Query(max_length=255, pattern=r"^[^/\\\x00-\x1f\x7f]+\.opa(\.jar)?$")
]
ArchiveMode = Annotated[Literal["batch", "autonomous", "interactive"] | None, Query()]
QueryId = Annotated[str | None, Query(pattern=r"^[a-z0-9][a-z0-9._:-]{0,63}$")]
