"""Evidence: MOVA episodes and content-addressed artifacts."""

from __future__ import annotations

import json

from pydantic import ValidationError

from contracts import (
    Episode,
    EpisodeView,
    ErrorCode,
    GatehouseError,
    JsonObject,
    canonical_json,
    sha256_hex,
)
from ledger import events
from ledger._db import Conn, now_iso, sql
from ledger._statement import execute, rows_changed

__all__ = [
    "get_artifact",
    "list_episodes",
    "list_security_events",
    "put_artifact",
    "put_episode",
    "put_security_event",
    "run_artifacts",
]


def put_artifact(
    conn: Conn, *, run_id: str, step_id: str, name: str, media_type: str, content: bytes
) -> str:
    """Store bytes under their SHA-256 (once) and link them to the run; return the digest."""
    digest = sha256_hex(content)
    execute(
        conn,
        sql(
            "INSERT INTO artifacts (sha256, media_type, size_bytes, content, created_at)"
            " VALUES (:d, :m, :n, :c, :t) ON CONFLICT (sha256) DO NOTHING"
        ),
        {"d": digest, "m": media_type, "n": len(content), "c": content, "t": now_iso()},
    )
    execute(
        conn,
        sql(
            "INSERT INTO run_artifacts (run_id, sha256, step_id, name) VALUES (:r, :d, :s, :n)"
            " ON CONFLICT (run_id, step_id, name) DO NOTHING"
        ),
        {"r": run_id, "d": digest, "s": step_id, "n": name},
    )
    return digest


def get_artifact(conn: Conn, digest: str) -> tuple[str, bytes] | None:
    row = execute(
        conn, sql("SELECT media_type, content FROM artifacts WHERE sha256 = :d"), {"d": digest}
    ).first()
    if row is None:
        return None
    content = bytes(row[1])
    if sha256_hex(content) != digest:
        raise GatehouseError(
            ErrorCode.CORRUPT_RECORD,
            "artifact content does not match its digest",
            {"sha256": digest},
        )
    return str(row[0]), content


def run_artifacts(conn: Conn, run_id: str) -> list[dict[str, str | int]]:
    rows = execute(
        conn,
        sql(
            "SELECT ra.step_id, ra.name, ra.sha256, a.media_type, a.size_bytes"
            " FROM run_artifacts ra JOIN artifacts a ON a.sha256 = ra.sha256"
            " WHERE ra.run_id = :r ORDER BY ra.step_id, ra.name"
        ),
        {"r": run_id},
    ).all()
    return [
        {"step_id": r[0], "name": r[1], "sha256": r[2], "media_type": r[3], "size_bytes": r[4]}
        for r in rows
    ]


def put_episode(conn: Conn, run_id: str, step_id: str | None, episode: Episode) -> None:
    """Episode ids are derived from what they record, so a re-run writes nothing new."""
    events.later(
        conn,
        "INSERT INTO episodes (episode_id, run_id, step_id, episode_type, result_status,"
        " body_json, recorded_at) VALUES (:i, :r, :s, :t, :st, :b, :at)"
        " ON CONFLICT (episode_id) DO NOTHING",
        {
            "i": episode.episode_id,
            "r": run_id,
            "s": step_id,
            "t": episode.episode_type,
            "st": episode.result_status,
            "b": canonical_json(episode.model_dump(mode="json")),
            "at": episode.recorded_at,
        },
        events.Emits(
            run_id, "episode",
            {"episode_id": episode.episode_id, "episode_type": episode.episode_type,
             "result_status": episode.result_status, "step_id": step_id},
            notify=episode.episode_type.startswith("security_event"),
        ),
    )  # fmt: skip


def list_episodes(conn: Conn, run_id: str) -> list[EpisodeView]:
    rows = execute(
        conn,
        sql(
            "SELECT episode_id, run_id, step_id, episode_type, result_status, body_json,"
            " recorded_at FROM episodes WHERE run_id = :r ORDER BY recorded_at, episode_id"
        ),
        {"r": run_id},
    ).all()
    try:
        return [
            EpisodeView(
                episode_id=r[0],
                run_id=r[1],
                step_id=r[2],
                episode_type=r[3],
                result_status=r[4],
                body=json.loads(r[5]),
                recorded_at=r[6],
            )
            for r in rows
        ]
    except (ValidationError, ValueError) as exc:
        raise GatehouseError(
            ErrorCode.CORRUPT_RECORD, "an episode row failed validation", {"run_id": run_id}
        ) from exc


def put_security_event(
    conn: Conn,
    *,
    episode_id: str,
    run_id: str | None,
    error_code: str,
    category: str,
    severity: str,
    body: JsonObject,
    recorded_at: str,
    fingerprint: str | None = None,
    open_since: str | None = None,
    repeats: int = 1,
) -> bool:
    """A refusal outside a run's own workflow (a refused request), as a MOVA security
    episode. With a ``fingerprint``: while a row of that fingerprint recorded at or after
    ``open_since`` is open, the refusal (``repeats`` of it) is counted on that row instead
    (``repeat_count``, ``last_seen_at``), so repeats leave no new row. True: a row was added."""
    if fingerprint is not None and open_since is not None:
        counted = execute(
            conn,
            sql(
                "UPDATE security_events SET repeat_count = repeat_count + :n, last_seen_at = :t"
                " WHERE episode_id = (SELECT episode_id FROM security_events"
                " WHERE fingerprint = :f AND recorded_at >= :since"
                " ORDER BY recorded_at DESC, episode_id LIMIT 1)"
            ),
            {"n": repeats, "t": recorded_at, "f": fingerprint, "since": open_since},
        )
        if rows_changed(counted):
            return False
    added = execute(
        conn,
        sql(
            "INSERT INTO security_events (episode_id, run_id, error_code, category, severity,"
            " body_json, recorded_at, fingerprint, repeat_count, last_seen_at)"
            " VALUES (:i, :r, :c, :cat, :sev, :b, :t, :f, :n, :t)"
            " ON CONFLICT (episode_id) DO NOTHING"
        ),
        {
            "i": episode_id,
            "r": run_id,
            "c": error_code,
            "cat": category,
            "sev": severity,
            "b": canonical_json(body),
            "t": recorded_at,
            "f": fingerprint,
            "n": repeats,
        },
    )
    return bool(rows_changed(added))


def list_security_events(conn: Conn, limit: int = 100) -> list[JsonObject]:
    """Most recently seen first: refused requests and, for a complete picture, refusals
    inside runs. Each is its MOVA episode (the first of its repeats) with two facts of
    the row in its ``result_details`` (where MOVA keeps an emitter's own facts, so the
    episode as served still validates): ``repeat_count`` (how many refusals the row
    stands for) and ``last_seen_at`` (the latest of them)."""
    rows = execute(
        conn,
        sql(
            "SELECT body_json, repeat_count, COALESCE(last_seen_at, recorded_at)"
            " FROM security_events"
            " UNION ALL SELECT body_json, 1, recorded_at FROM episodes"
            " WHERE episode_type LIKE 'security_event/%'"
        ),
    ).all()
    bodies: list[tuple[str, JsonObject]] = []  # (last seen, the episode as served)
    for raw, repeats, last_seen in rows:
        try:
            loaded = json.loads(raw)
        except ValueError as exc:
            raise GatehouseError(ErrorCode.CORRUPT_RECORD, "a security event is not JSON") from exc
        if isinstance(loaded, dict):
            details = loaded.get("result_details")
            merged: JsonObject = dict(details) if isinstance(details, dict) else {}
            merged.update(repeat_count=int(repeats), last_seen_at=str(last_seen))
            bodies.append((str(last_seen), {**loaded, "result_details": merged}))
    bodies.sort(key=lambda pair: pair[0], reverse=True)
    return [body for _, body in bodies[:limit]]
