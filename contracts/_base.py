"""Base model for every envelope: closed (unknown fields are refused)."""

from __future__ import annotations

import uuid
from typing import Annotated

from pydantic import BaseModel, ConfigDict, StringConstraints

__all__ = ["RUN_ID_PATTERN", "Closed", "Digest", "Identifier", "ShortText", "new_run_id"]


class Closed(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, str_strip_whitespace=False)


Identifier = Annotated[str, StringConstraints(pattern=r"^[a-z0-9][a-z0-9._:-]{0,63}$")]
Digest = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{64}$")]
# Free text a person typed; NUL is refused because PostgreSQL cannot store it.
ShortText = Annotated[str, StringConstraints(min_length=1, max_length=2000, pattern=r"^[^\x00]*$")]

# A run's id: "run_" and 32 lower-case hex digits (a UUID4 without its dashes).
RUN_ID_PATTERN = r"run_[0-9a-f]{32}"


def new_run_id() -> str:
    return "run_" + uuid.uuid4().hex
