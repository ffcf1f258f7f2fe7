"""Step checkpoints: the rows in DBOS's datasource table (``datasource_outputs``) that
a step which must commit once writes in its own transaction (``worker.durable._tx``).

Read and written as DBOS's datasource does (one row per workflow and step, the
output serialized by DBOS), so a worker of the previous release, which wrote them
through DBOS, and this one read each other's. The values are DBOS's: the caller
serializes and keys them.
"""

from __future__ import annotations

from ledger._db import Conn, dbos_workflows, is_postgres, sql
from ledger._statement import execute, rows_changed

__all__ = ["Row", "drop_finished", "look", "read", "write"]

# A checkpoint as DBOS stores it: (output, error, serialization).
Row = tuple[str | None, str | None, str | None]


def _table(conn: Conn) -> str:
    """DBOS's datasource table as ``conn`` names it (schema ``dbos`` on PostgreSQL)."""
    return "dbos.datasource_outputs" if is_postgres(conn) else "datasource_outputs"


def read(conn: Conn, workflow_id: str, step_id: int) -> Row | None:
    """The step's checkpoint: (output, error, serialization); None when it has none."""
    row = execute(
        conn,
        sql(
            f"SELECT output, error, serialization FROM {_table(conn)}"  # noqa: S608  (fixed name)
            " WHERE workflow_id = :w AND step_id = :s"
        ),
        {"w": workflow_id, "s": step_id},
    ).first()
    return None if row is None else (row[0], row[1], row[2])


def look(
    conn: Conn, workflow_id: str, checkpoint_of: str, step_id: int
) -> tuple[str | None, Row | None]:
    """In one statement, what a record's transaction reads first: DBOS's status of
    the workflow ``workflow_id`` (None: DBOS holds no such workflow) and the step's
    checkpoint, keyed by ``checkpoint_of`` and ``step_id`` (None: it has none)."""
    workflows, table = dbos_workflows(conn), _table(conn)
    row = execute(
        conn,
        sql(
            "SELECT w.status, c.output, c.error, c.serialization, c.workflow_id"  # noqa: S608
            f" FROM (SELECT 1 AS one) k LEFT JOIN {workflows} w ON w.workflow_uuid = :w"
            f" LEFT JOIN {table} c ON c.workflow_id = :c AND c.step_id = :s"
        ),
        {"w": workflow_id, "c": checkpoint_of, "s": step_id},
    ).one()
    status = None if row[0] is None else str(row[0])
    return status, None if row[4] is None else (row[1], row[2], row[3])


def write(
    conn: Conn, workflow_id: str, step_id: int, output: str | None, serialization: str
) -> bool:
    """The step's checkpoint written in ``conn``'s transaction; False when another
    execution of the step wrote one first (on PostgreSQL, found once that one
    commits): the caller must roll back."""
    table = _table(conn)
    written = execute(
        conn,
        sql(
            f"INSERT INTO {table} (workflow_id, step_id, output, serialization)"  # noqa: S608
            " VALUES (:w, :s, :o, :z) ON CONFLICT (workflow_id, step_id) DO NOTHING"
            " RETURNING step_id"
        ),
        {"w": workflow_id, "s": step_id, "o": output, "z": serialization},
    ).first()
    return written is not None


def drop_finished(conn: Conn, limit: int = 500) -> int:
    """Delete the checkpoints of up to ``limit`` workflows DBOS has recorded
    ``SUCCESS``: every step of such a workflow has DBOS's own record, so nothing reads
    them again. Those of unfinished workflows stay (a step run again answers from its
    checkpoint), and so do those of workflows ended ``ERROR`` or ``CANCELLED``, which
    may be put back on the queue. How many rows went."""
    ck, wf = _table(conn), dbos_workflows(conn)
    done = execute(
        conn,
        sql(
            f"DELETE FROM {ck} WHERE workflow_id IN (SELECT w.workflow_uuid"  # noqa: S608
            f" FROM {wf} w WHERE w.workflow_uuid IN (SELECT c.workflow_id FROM {ck} c)"
            " AND w.status = 'SUCCESS' LIMIT :n)"
        ),
        {"n": limit},
    )
    return rows_changed(done)
