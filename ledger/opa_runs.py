"""Runs from OPA archives: the ``opa_runs`` row and the archive artifacts.

The input archive is written with the run, in the shim's submit transaction,
only after it passed validation; the output archive when the worker packs it.
Both are content-addressed artifacts of the run (step ``@opa``), so they are in
the run's evidence like any other.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from pydantic import ValidationError

from contracts import ErrorCode, GatehouseError
from contracts.opa_run import OPA_STEP, OpaJob, OpaRunView, OpaSigner
from ledger._db import Conn, now_iso, sql
from ledger._statement import execute
from ledger.evidence import get_artifact, put_artifact

__all__ = [
    "COLUMNS",
    "INPUT_NAME",
    "MEDIA_TYPE",
    "OUTPUT_NAME",
    "Intake",
    "get",
    "job",
    "output_bytes",
    "put_input",
    "put_output",
    "view_of",
]

MEDIA_TYPE = "application/vnd.opa+zip"
INPUT_NAME = "input.opa"
OUTPUT_NAME = "output.opa"


@dataclass(frozen=True)
class Intake:
    """A validated archive on its way into a new run."""

    job: OpaJob
    signer: OpaSigner | None
    content: bytes


def put_input(conn: Conn, run_id: str, intake: Intake) -> None:
    """The accepted archive of a new run (its ``runs`` row is already written)."""
    job, signer, content = intake.job, intake.signer, intake.content
    digest = put_artifact(
        conn,
        run_id=run_id,
        step_id=OPA_STEP,
        name=INPUT_NAME,
        media_type=MEDIA_TYPE,
        content=content,
    )
    if digest != job.archive_sha256:
        raise GatehouseError(ErrorCode.INTERNAL_ERROR, "the stored archive is not the one checked")
    execute(
        conn,
        sql(
            "INSERT INTO opa_runs (run_id, archive_name, archive_sha256, opa_version,"
            " execution_mode, signer_json, job_json, created_at)"
            " VALUES (:r, :n, :d, :v, :m, :s, :j, :t)"
        ),
        {
            "r": run_id,
            "n": job.archive_name,
            "d": digest,
            "v": job.opa_version,
            "m": job.execution_mode,
            "s": None if signer is None else signer.model_dump_json(),
            "j": job.model_dump_json(),
            "t": now_iso(),
        },
    )


def put_output(conn: Conn, run_id: str, content: bytes) -> str:
    """The run's output archive; its digest. Packing again writes the same row."""
    digest = put_artifact(
        conn,
        run_id=run_id,
        step_id=OPA_STEP,
        name=OUTPUT_NAME,
        media_type=MEDIA_TYPE,
        content=content,
    )
    updated = execute(
        conn,
        sql("UPDATE opa_runs SET output_sha256 = :d WHERE run_id = :r RETURNING run_id"),
        {"d": digest, "r": run_id},
    ).first()
    if updated is None:
        _fork_row(conn, run_id, digest)
    return digest


def _fork_row(conn: Conn, run_id: str, output_sha256: str) -> None:
    """A fork runs its parent's archive: it gets the parent's row (and input artifact)."""
    parent = execute(
        conn, sql("SELECT parent_run_id FROM runs WHERE run_id = :r"), {"r": run_id}
    ).scalar()
    if parent is None:
        return
    execute(
        conn,
        sql(
            "INSERT INTO opa_runs (run_id, archive_name, archive_sha256, opa_version,"
            " execution_mode, signer_json, job_json, output_sha256, created_at)"
            " SELECT :r, archive_name, archive_sha256, opa_version, execution_mode,"
            " signer_json, job_json, :d, :t FROM opa_runs WHERE run_id = :p"
        ),
        {"r": run_id, "p": parent, "d": output_sha256, "t": now_iso()},
    )
    execute(
        conn,
        sql(
            "INSERT INTO run_artifacts (run_id, sha256, step_id, name)"
            " SELECT :r, sha256, step_id, name FROM run_artifacts"
            " WHERE run_id = :p AND step_id = :s AND name = :n"
            " ON CONFLICT (run_id, step_id, name) DO NOTHING"
        ),
        {"r": run_id, "p": parent, "s": OPA_STEP, "n": INPUT_NAME},
    )


# A run's OPA record's columns, as ``view_of`` reads them (a query may select them
# with others).
COLUMNS = "archive_name, archive_sha256, opa_version, execution_mode, signer_json, output_sha256"


def get(conn: Conn, run_id: str) -> OpaRunView | None:
    row = execute(
        conn,
        sql(f"SELECT {COLUMNS} FROM opa_runs WHERE run_id = :r"),  # noqa: S608  (fixed columns)
        {"r": run_id},
    ).first()
    return None if row is None else view_of(row, run_id)


def view_of(row: Sequence[object], run_id: str) -> OpaRunView:
    """The record from its ``COLUMNS``, in that order."""
    try:
        signer = None if row[4] is None else OpaSigner.model_validate(json.loads(str(row[4])))
        return OpaRunView.model_validate({
            "archive_name": row[0], "archive_sha256": row[1], "opa_version": row[2],
            "execution_mode": row[3], "signer": signer, "output_sha256": row[5],
        })  # fmt: skip
    except (ValidationError, ValueError) as exc:
        raise GatehouseError(
            ErrorCode.CORRUPT_RECORD,
            "an opa_runs row failed validation when read back",
            {"table": "opa_runs", "key": run_id, "problem": str(exc)[:500]},
        ) from exc


def job(conn: Conn, run_id: str) -> OpaJob | None:
    """The OpaJob the run's workflow was given (None: not an OPA run)."""
    row = execute(
        conn, sql("SELECT job_json FROM opa_runs WHERE run_id = :r"), {"r": run_id}
    ).first()
    if row is None:
        return None
    try:
        return OpaJob.model_validate_json(row[0])
    except ValidationError as exc:
        raise GatehouseError(
            ErrorCode.CORRUPT_RECORD,
            "an opa_runs row failed validation when read back",
            {"table": "opa_runs", "key": run_id, "problem": str(exc)[:500]},
        ) from exc


def output_bytes(conn: Conn, run_id: str) -> bytes | None:
    """The run's output archive, once packed."""
    found = get(conn, run_id)
    if found is None or found.output_sha256 is None:
        return None
    stored = get_artifact(conn, found.output_sha256)
    return None if stored is None else stored[1]
