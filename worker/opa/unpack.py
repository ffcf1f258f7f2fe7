"""The run's archive, extracted into its workspace before the first step.

The bytes come from the ledger (the artifact the shim stored after validating
them) and must have the SHA-256 the job names; they are validated again by
the same code before anything is written (a worker trusts no row blindly),
extracted into a fresh folder and made read-only, and only then moved into
place as ``<workspace>/.opa``. A second call finds it there and does nothing,
so every attempt of every step may ask.
"""

from __future__ import annotations

import datetime as dt
import os
import shutil
import tempfile
from pathlib import Path

from contracts import ErrorCode, GatehouseError, sha256_hex
from contracts.opa_run import OPA_DIR, OUTPUT_DIR, OpaJob
from ledger import evidence
from opa_format import Archive, TrustStore, extract, read_archive
from worker.runtime import WorkerSettings, runtime

__all__ = ["accepted_archive", "archive_of", "unpack"]


def archive_of(job: OpaJob) -> bytes:
    """The accepted archive's bytes, checked against the digest the job names."""
    with runtime().db.engine.connect() as conn:
        stored = evidence.get_artifact(conn, job.archive_sha256)
    if stored is None or sha256_hex(stored[1]) != job.archive_sha256:
        raise GatehouseError(
            ErrorCode.CORRUPT_RECORD,
            f"the run's archive {job.archive_sha256[:12]} is missing or altered in the ledger",
        )
    return stored[1]


def _read_only(root: Path) -> None:
    """Owner read (and enter) only; depth first, so no folder is closed too early."""
    for folder, dirs, files in os.walk(root, topdown=False):
        base = Path(folder)
        for name in files:
            (base / name).chmod(0o400)
        for name in dirs:
            (base / name).chmod(0o500)
    root.chmod(0o500)


def unpack(
    settings: WorkerSettings, workspace: Path, job: OpaJob, archive: Archive | None = None
) -> None:
    """``<workspace>/.opa`` (the archive, read-only) and ``<workspace>/output`` exist.
    ``archive``: the run's archive when the caller has already read it."""
    target = workspace / OPA_DIR
    (workspace / OUTPUT_DIR).mkdir(exist_ok=True)
    if target.is_dir() and not target.is_symlink():
        return
    archive = archive or accepted_archive(settings, job)
    staging = Path(tempfile.mkdtemp(prefix=".opa-", dir=workspace))
    try:
        extracted = extract(archive, staging / "x")
        _read_only(extracted)
        extracted.rename(target)  # atomic: a half-extracted archive is never seen
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def accepted_archive(settings: WorkerSettings, job: OpaJob) -> Archive:
    """The run's archive, read and validated again by the same code as at intake.

    The signature was verified at intake; certificates are held to that moment,
    not to now (an archive accepted yesterday does not expire in the queue).
    """
    at = None if job.accepted_at is None else dt.datetime.fromisoformat(job.accepted_at)
    return read_archive(
        archive_of(job),
        trust=TrustStore.load(settings.opa_trust_dir),
        name=job.archive_name,
        now=at,
    )
