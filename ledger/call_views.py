"""A run's calls as the ledger lists them (``list_calls``): in the chain's order, each
with how many times it was sent and why it was sent again. Written by ``ledger.calls``."""

from __future__ import annotations

from contracts import CallView, ErrorCode, GatehouseError
from ledger._db import Conn, sql
from ledger._statement import execute
from ledger.calls import resends_of

__all__ = ["list_calls"]


def list_calls(conn: Conn, run_id: str) -> list[CallView]:
    rows = execute(
        conn,
        sql(
            "SELECT op_key, run_id, step_id, attempt, kind, target, status, request_digest,"
            " response_digest, error_code, started_at, finished_at, duration_ms, resends_json"
            # the chain's order, never a worker's wall clock (which may have been stepped);
            # calls not chained yet (started, in doubt) come last
            " FROM calls WHERE run_id = :r ORDER BY chain_seq IS NULL, chain_seq, started_at,"
            " op_key"
        ),
        {"r": run_id},
    ).all()
    resends = {str(r[0]): resends_of(str(r[0]), r[13]) for r in rows}
    out = []
    for r in rows:
        try:
            out.append(
                CallView(
                    op_key=r[0],
                    run_id=r[1],
                    step_id=r[2],
                    attempt=r[3],
                    kind=r[4],
                    target=r[5],
                    status=r[6],
                    request_digest=r[7],
                    response_digest=r[8],
                    error_code=r[9],
                    started_at=r[10],
                    finished_at=r[11],
                    duration_ms=r[12],
                    sends=1 + len(resends[r[0]]),
                    resends=resends[r[0]],
                )
            )
        except ValueError as exc:
            raise GatehouseError(
                ErrorCode.CORRUPT_RECORD, "a ledger row failed validation", {"op_key": r[0]}
            ) from exc
    return out
