"""Evidence bundles: one run's record in one signed file, checkable offline.

``export_bundle`` reads the run from the database and returns the bundle::

    {"format": "https://gatehouse.dev/evidence-bundle/v2",
     "content": {run, plan, decisions, ledger, episodes, artifacts, policies,
                 replay, checkpoints},
     "digests": {"content": {"sha256": …, "canonicalization": "rfc8785"}},
     "envelope": DSSE envelope of an in-toto Statement v1}

The Statement's subject is the content, by the SHA-256 of its RFC 8785
spelling; its predicate (``PREDICATE_TYPE``) repeats what a reader checks
first: run id, plan digest, chain head, entry count, trace digest, decisions.
The ledger entries carry their stored request and response bodies as the
exact text the database holds, so a verifier recomputes every digest and
chain link as ``ledger.chain`` does (Gatehouse's canonical JSON: those
digests say ``"canonicalization": "gatehouse-json-v1"``). Artifacts are
listed by digest, not included. ``ledger.bundle_verify`` checks a bundle.
"""

from __future__ import annotations

import json

from google.protobuf import json_format
from in_toto_attestation.v1.resource_descriptor import ResourceDescriptor
from in_toto_attestation.v1.statement import Statement

from contracts import JsonObject, JsonValue
from ledger import anchors, approvals, call_views, evidence
from ledger._db import Conn, now_iso, sql
from ledger._statement import execute
from ledger.chain import ENTRY_FIELDS, GENESIS
from ledger.signing import RFC8785, SigningKey, jcs_digest, sign_envelope

__all__ = [
    "BUNDLE_FORMAT",
    "CHAIN_CANONICALIZATION",
    "LEGACY_FORMAT",
    "PREDICATE_TYPE",
    "STATEMENT_PAYLOAD_TYPE",
    "bundle_bytes",
    "export_bundle",
    "predicate_of",
    "statement_of",
]

BUNDLE_FORMAT = "https://gatehouse.dev/evidence-bundle/v2"
# Bundles exported before v2 still verify: their keys are in the exporter's order, not
# sorted, so a reordering of an object's keys is the one change they cannot show.
LEGACY_FORMAT = "https://gatehouse.dev/evidence-bundle/v1"
PREDICATE_TYPE = "https://gatehouse.dev/attestation/run/v1"
STATEMENT_PAYLOAD_TYPE = "application/vnd.in-toto+json"
CHAIN_CANONICALIZATION = "gatehouse-json-v1"
# An entry's hash is ``ledger.chain.entry_hash``: over [prev_hash, 2, sealed copy] for
# an entry with chain_version 2, over [prev_hash, *ENTRY_FIELDS] for one before it.
_RUN = (
    "run_id", "intent_id", "recipe", "objective", "mode", "status", "submitted_by",
    "policy_profile", "tool_pool", "plan_digest", "error_code", "created_at", "finished_at",
    "profile_digest", "tool_pool_digest", "trace_digest", "random_seed", "parent_run_id",
    "fork_from_step",
)  # fmt: skip


def _run(conn: Conn, run_id: str) -> JsonObject | None:
    row = execute(
        conn,
        sql(f"SELECT {', '.join(_RUN)} FROM runs WHERE run_id = :r"),  # noqa: S608  (fixed columns)
        {"r": run_id},
    ).first()
    return None if row is None else dict(zip(_RUN, row, strict=True))


def _plans(conn: Conn, run_id: str) -> list[JsonValue]:
    rows = execute(
        conn,
        sql(
            "SELECT revision, plan_digest, previous_digest, plan_json FROM plan_revisions"
            " WHERE run_id = :r ORDER BY revision"
        ),
        {"r": run_id},
    ).all()
    return [
        {"revision": r[0], "plan_digest": r[1], "previous_digest": r[2], "plan_json": r[3]}
        for r in rows
    ]


def _entries(conn: Conn, run_id: str) -> tuple[list[JsonValue], list[JsonValue]]:
    """(the chain's entries in order, the unfinished entries that are not on it)."""
    rows = execute(
        conn,
        sql(
            f"SELECT {', '.join(ENTRY_FIELDS)}, chain_seq, prev_hash, entry_hash,"  # noqa: S608
            " request_json, response_json, sealed_json, chain_version FROM calls"
            " WHERE run_id = :r"
            " ORDER BY chain_seq IS NULL, chain_seq, op_key"
        ),
        {"r": run_id},
    ).all()
    chained: list[JsonValue] = []
    unfinished: list[JsonValue] = []
    for r in rows:
        entry: JsonObject = dict(zip(ENTRY_FIELDS, r[:10], strict=True))
        entry.update(
            chain_seq=r[10], prev_hash=r[11], entry_hash=r[12], request_json=r[13],
            response_json=r[14], sealed_json=r[15], chain_version=r[16],
        )  # fmt: skip
        (unfinished if r[10] is None else chained).append(entry)
    return chained, unfinished


def _decisions(conn: Conn, run_id: str) -> list[JsonValue]:
    return [a.model_dump(mode="json") for a in approvals.approvals_of(conn, run_id)]


def _resends(conn: Conn, run_id: str) -> JsonObject:
    """Each call sent again under its key, by op_key (no key when none was: a bundle of
    a run no crash cut into reads as before). Not on the hash chain; attested by the
    statement's subject digest, as everything in the content is."""
    found: JsonObject = {
        c.op_key: [r.model_dump(mode="json") for r in c.resends]
        for c in call_views.list_calls(conn, run_id)
        if c.resends
    }
    return {"resends": found} if found else {}


def _endorsements(conn: Conn, run_id: str) -> JsonObject:
    """The approvals on the way to a quorum, when the run's plan needed several (no
    key otherwise: a bundle of a run with one approver reads as before)."""
    found = [e.model_dump(mode="json") for e in approvals.endorsements_of(conn, run_id)]
    return {"endorsements": list[JsonValue](found)} if found else {}


def _episodes(conn: Conn, run_id: str) -> list[JsonValue]:
    return [e.model_dump(mode="json") for e in evidence.list_episodes(conn, run_id)]


def content_of(conn: Conn, run_id: str) -> JsonObject | None:
    """Everything the bundle attests about the run, or None (no such run)."""
    run = _run(conn, run_id)
    if run is None:
        return None
    chained, unfinished = _entries(conn, run_id)
    last = chained[-1] if chained else None
    head = last["entry_hash"] if isinstance(last, dict) else GENESIS
    artifacts: list[JsonValue] = [dict(a) for a in evidence.run_artifacts(conn, run_id)]
    return {
        "run": run,
        "plan": {
            "plan_digest": run["plan_digest"],
            "canonicalization": CHAIN_CANONICALIZATION,
            "revisions": _plans(conn, run_id),
        },
        "decisions": _decisions(conn, run_id),
        **_endorsements(conn, run_id),
        "ledger": {
            "canonicalization": CHAIN_CANONICALIZATION,
            "genesis": GENESIS,
            "entry_hash": "sha256(canonical [prev_hash, 2, the parsed sealed_json]) where"
            " chain_version is 2, else sha256(canonical [prev_hash, "
            + ", ".join(ENTRY_FIELDS)
            + "])",
            "entries": chained,
            "count": len(chained),
            "head": head,
            "unfinished": unfinished,
        },
        **_resends(conn, run_id),
        "episodes": _episodes(conn, run_id),
        "artifacts": artifacts,
        "policies": {
            "profile": run["policy_profile"],
            "profile_digest": run["profile_digest"],
            "tool_pool": run["tool_pool"],
            "tool_pool_digest": run["tool_pool_digest"],
        },
        "replay": {"trace_digest": run["trace_digest"]},
        "checkpoints": list[JsonValue](anchors.records_of(conn, run_id)),
    }


def predicate_of(content: JsonObject, exported_at: str) -> JsonObject:
    """What the Statement says about the run, drawn from ``content``."""
    run, ledger = content["run"], content["ledger"]
    assert isinstance(run, dict) and isinstance(ledger, dict)
    decisions = content["decisions"]
    assert isinstance(decisions, list)
    return {
        "run_id": run["run_id"],
        "status": run["status"],
        "plan_digest": run["plan_digest"],
        "chain_head": ledger["head"],
        "entries": ledger["count"],
        "trace_digest": run["trace_digest"],
        "decisions": [
            {k: d[k] for k in ("plan_digest", "decision", "decided_by", "decided_at")}
            for d in decisions
            if isinstance(d, dict)
        ],
        "profile_digest": run["profile_digest"],
        "tool_pool_digest": run["tool_pool_digest"],
        "chain_canonicalization": CHAIN_CANONICALIZATION,
        "content_canonicalization": RFC8785,
        "bundle_format": BUNDLE_FORMAT,  # signed: a v2 bundle cannot pass for a v1
        "exported_at": exported_at,
    }


def statement_of(run_id: str, content_digest: str, predicate: JsonObject) -> JsonObject:
    """The in-toto Statement v1 (built and validated by ``in_toto_attestation``)."""
    subject = ResourceDescriptor(name=f"{run_id}/content", digest={"sha256": content_digest})
    statement = Statement([subject.pb], PREDICATE_TYPE, predicate)
    statement.validate()
    out: JsonObject = json.loads(json_format.MessageToJson(statement.pb))
    # protobuf's Struct holds every number as a double; the predicate's are counts.
    out["predicate"] = predicate
    return out


def bundle_bytes(bundle: JsonObject) -> bytes:
    """The one spelling of a bundle on disk (keys sorted, one space of indent, UTF-8).
    ``verify_bundle`` holds a file to it, so a byte that changes nothing it checks (a
    space, an escape, a repeated or reordered key) is refused too: every byte of a
    bundle is covered. A v1 bundle's spelling kept its keys in the exporter's order."""
    legacy = bundle.get("format") == LEGACY_FORMAT
    text = json.dumps(bundle, indent=1, ensure_ascii=False, sort_keys=not legacy)
    return (text + "\n").encode("utf-8")


def export_bundle(conn: Conn, run_id: str, key: SigningKey) -> JsonObject | None:
    """The run's evidence bundle, signed with ``key``; None when there is no such run."""
    content = content_of(conn, run_id)
    if content is None:
        return None
    digest = jcs_digest(content)
    statement = statement_of(run_id, digest, predicate_of(content, now_iso()))
    return {
        "format": BUNDLE_FORMAT,
        "content": content,
        "digests": {"content": {"sha256": digest, "canonicalization": RFC8785}},
        "envelope": sign_envelope(key, STATEMENT_PAYLOAD_TYPE, statement),
    }
