"""The limits an archive must stay within, with safe defaults.

Every limit is enforced on the bytes actually decompressed, while streaming,
not only on what the ZIP headers claim: a header that lies about a size cannot
get an entry past them.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["ArchiveLimits"]

_MIB = 1024 * 1024


class ArchiveLimits(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    max_archive_bytes: int = Field(default=64 * _MIB, gt=0)
    """The archive file itself (compressed)."""
    max_entries: int = Field(default=1000, gt=0)
    max_entry_bytes: int = Field(default=16 * _MIB, gt=0)
    """One entry, uncompressed."""
    max_total_bytes: int = Field(default=64 * _MIB, gt=0)
    """All entries together, uncompressed."""
    max_ratio: int = Field(default=100, gt=0)
    """Uncompressed / compressed, per entry and for the whole archive."""
    ratio_floor_bytes: int = Field(default=64 * 1024, ge=0)
    """The ratio is judged only past this many uncompressed bytes (tiny text compresses well)."""
    max_name_bytes: int = Field(default=255, gt=0)
    max_depth: int = Field(default=16, gt=0)
    max_manifest_bytes: int = Field(default=64 * 1024, gt=0)
    max_prompt_bytes: int = Field(default=1 * _MIB, gt=0)
    max_history_bytes: int = Field(default=8 * _MIB, gt=0)
