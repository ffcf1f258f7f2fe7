"""A run that came from an OPA archive: what the shim accepted, what the worker packed.

The archive itself is outside data. Its bytes are stored once, by SHA-256, as an
artifact of the run (step ``@opa``, name ``input.opa``); the run's output archive
likewise (``output.opa``). ``OpaJob`` rides on the intent job, so the worker knows
an OPA run without asking the database; ``OpaRunView`` is what the run view shows
approvers: that the objective came from an archive, which one, and who signed it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field

from contracts._base import Closed, Digest

__all__ = [
    "OPA_DIR",
    "OPA_STEP",
    "OUTPUT_DIR",
    "OpaExecutionMode",
    "OpaJob",
    "OpaRunView",
    "OpaSigner",
    "opa_env",
]

OPA_STEP = "@opa"  # the run_artifacts step id of the input and output archives
# In the run's workspace: the archive extracted (read-only), and where the run
# writes what goes into its output archive.
OPA_DIR = ".opa"
OUTPUT_DIR = "output"
OpaExecutionMode = Literal["interactive", "batch", "autonomous"]


class OpaSigner(Closed):
    """Who signed the archive, as its verified signature says."""

    subject: str = Field(max_length=1000)
    issuer: str = Field(max_length=1000)
    serial: str = Field(max_length=200)
    fingerprint_sha256: str = Field(max_length=200)
    not_before: str
    not_after: str
    trusted_by: str = Field(max_length=200)  # the trust store certificate that vouches


class OpaJob(Closed):
    """The archive of an OPA run, as the worker needs it."""

    archive_name: str = Field(min_length=1, max_length=255)
    archive_sha256: Digest
    opa_version: str = Field(min_length=1, max_length=32)
    execution_mode: OpaExecutionMode
    data_root: str = Field(default="data/", max_length=255)  # the manifest's Data-Root
    accepted_at: str | None = None  # ISO-8601: when the shim checked it (signatures hold then)


def opa_env(job: OpaJob, workspace: Path) -> dict[str, str]:
    """The variables every process a handler starts for an OPA run is given."""
    extracted = workspace / OPA_DIR
    return {
        "OPA_VERSION": job.opa_version,
        "OPA_ARCHIVE_NAME": job.archive_name,
        "OPA_EXTRACTED_ROOT": str(extracted),
        "OPA_DATA_ROOT": str(extracted / job.data_root.strip("/")),
        "OPA_OUTPUT_ROOT": str(workspace / OUTPUT_DIR),
        "OPA_EXECUTION_MODE": job.execution_mode,
    }


class OpaRunView(Closed):
    source: Literal["opa_archive"] = "opa_archive"
    archive_name: str
    archive_sha256: Digest
    opa_version: str
    execution_mode: OpaExecutionMode
    signer: OpaSigner | None  # None: unsigned
    output_sha256: Digest | None = None  # the output archive, once packed
