"""Check an evidence bundle offline: no database, no network, only the bundle and a key.

The checks, in order; the first that fails is the answer (``BundleReport.problem``):

1. the file is a bundle (JSON, the format named) and covered whole: its keys, the
   envelope's and each signature's are the ones below and no others, its one
   signature is the given key's, its ``digests`` block is the one the content
   gives, and its bytes are the exporter's spelling of what they hold
   (``bundle_bytes``: no space, escape or repeated key that changes nothing);
2. signature: a DSSE signature of the given key over ``PAE(payloadType, payload)``;
3. statement: the payload is an in-toto Statement v1 with Gatehouse's predicate type;
4. plan: every plan revision matches its digest, and the run's plan is one of them;
5. ledger: every entry, in order — its place (chain_seq), its link (prev_hash), its
   request and response bodies against their digests, its entry_hash — then the
   count and head the ledger section states;
6. the statement's subject digest is the SHA-256 of the content's RFC 8785 spelling
   (this covers everything not recomputed above: episodes, artifacts, the run row);
7. the predicate says what the content says (run id, plan digest, head, entries,
   trace digest, decisions);
8. checkpoints: each is signed by the given key (or says it is unsigned) and the
   chain holds it.

Steps 4-5 come before 6 so that an edited entry is named by what is wrong with it,
not only by the content digest it changes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from google.protobuf import json_format
from in_toto_attestation.v1 import statement_pb2
from in_toto_attestation.v1.statement import Statement

from contracts import JsonObject, JsonValue, digest_of
from ledger.anchors import CHECKPOINT_PAYLOAD_TYPE
from ledger.bundle import (
    BUNDLE_FORMAT,
    LEGACY_FORMAT,
    PREDICATE_TYPE,
    STATEMENT_PAYLOAD_TYPE,
    bundle_bytes,
)
from ledger.chain import ENTRY_FIELDS, GENESIS, entry_hash, unsealed_field
from ledger.signing import RFC8785, SigningError, VerifyKey, jcs, jcs_digest, verify_envelope

__all__ = ["BundleReport", "verify_bundle"]


class _BrokenError(Exception):
    pass


@dataclass
class BundleReport:
    ok: bool
    problem: str | None = None
    facts: dict[str, JsonValue] = field(default_factory=dict)


def _obj(value: JsonValue, what: str) -> JsonObject:
    if not isinstance(value, dict):
        raise _BrokenError(f"{what} is missing or not an object")
    return value


def _list(value: JsonValue, what: str) -> list[JsonValue]:
    if not isinstance(value, list):
        raise _BrokenError(f"{what} is missing or not a list")
    return value


def _body_digest(raw: JsonValue) -> str | None:
    """As ``ledger.chain`` computes it from the stored text."""
    if raw is None:
        return None
    if not isinstance(raw, str):
        return "not text"
    try:
        parsed: JsonValue = json.loads(raw)
    except ValueError:
        return "unparseable"
    return digest_of(parsed)


def _statement(envelope: JsonObject, key: VerifyKey) -> JsonObject:
    try:
        payload = verify_envelope(envelope, key)
    except SigningError as exc:
        raise _BrokenError(f"signature: {exc}") from exc
    if envelope.get("payloadType") != STATEMENT_PAYLOAD_TYPE:
        raise _BrokenError(f"statement: payloadType is not {STATEMENT_PAYLOAD_TYPE}")
    try:
        raw = json.loads(payload)
        parsed = Statement.copy_from_pb(json_format.ParseDict(raw, statement_pb2.Statement()))
        parsed.validate()
    except (ValueError, json_format.ParseError) as exc:
        raise _BrokenError(f"statement: not an in-toto Statement v1 ({exc})") from exc
    if raw.get("predicateType") != PREDICATE_TYPE:
        raise _BrokenError(f"statement: predicateType is not {PREDICATE_TYPE}")
    return _obj(raw, "statement")


def _plan(content: JsonObject) -> str:
    plan = _obj(content.get("plan"), "content.plan")
    digests = []
    for r in _list(plan.get("revisions"), "content.plan.revisions"):
        rev = _obj(r, "a plan revision")
        if _body_digest(rev.get("plan_json")) != rev.get("plan_digest"):
            n = rev.get("revision")
            raise _BrokenError(f"plan revision {n}: the plan does not match its digest")
        digests.append(rev.get("plan_digest"))
    wanted = plan.get("plan_digest")
    if wanted is not None and wanted not in digests:
        raise _BrokenError("plan: the run's plan digest names no plan in the bundle")
    if _obj(content.get("run"), "content.run").get("plan_digest") != wanted:
        raise _BrokenError("plan: the run's plan digest differs from the plan section's")
    return str(wanted)


def _ledger(content: JsonObject) -> list[str]:
    """Every chain link recomputed from the bodies; the entry hashes in order."""
    ledger = _obj(content.get("ledger"), "content.ledger")
    prev, hashes = GENESIS, list[str]()
    for i, raw in enumerate(_list(ledger.get("entries"), "content.ledger.entries"), start=1):
        e = _obj(raw, f"ledger entry {i}")
        where = f"ledger entry {i} (step {e.get('step_id')})"
        if e.get("chain_seq") != i:
            raise _BrokenError(f"{where}: chain_seq {e.get('chain_seq')} where {i} was expected")
        if e.get("prev_hash") != prev:
            raise _BrokenError(f"{where}: prev_hash is not the previous entry's hash")
        if _body_digest(e.get("request_json")) != e.get("request_digest"):
            raise _BrokenError(f"{where}: the request body does not match its digest")
        if _body_digest(e.get("response_json")) != e.get("response_digest"):
            raise _BrokenError(f"{where}: the response body does not match its digest")
        changed = unsealed_field(e, ENTRY_FIELDS)
        if changed is not None:
            raise _BrokenError(f"{where}: {changed}")
        if entry_hash(prev, e) != e.get("entry_hash"):
            raise _BrokenError(f"{where}: entry hash does not match its body")
        prev = str(e["entry_hash"])
        hashes.append(prev)
    if ledger.get("count") != len(hashes):
        raise _BrokenError(
            f"ledger: {len(hashes)} entries where the bundle says {ledger.get('count')}"
        )
    if ledger.get("head") != prev:
        raise _BrokenError("ledger: the stated head is not the last entry's hash")
    return hashes


def _predicate(statement: JsonObject, content: JsonObject, hashes: list[str]) -> None:
    p = _obj(statement.get("predicate"), "statement predicate")
    run = _obj(content.get("run"), "content.run")
    decisions = [
        {k: d.get(k) for k in ("plan_digest", "decision", "decided_by", "decided_at")}
        for d in _list(content.get("decisions"), "content.decisions")
        if isinstance(d, dict)
    ]
    expected: dict[str, JsonValue] = {
        "run_id": run.get("run_id"),
        "plan_digest": run.get("plan_digest"),
        "chain_head": hashes[-1] if hashes else GENESIS,
        "entries": len(hashes),
        "trace_digest": run.get("trace_digest"),
        "decisions": list[JsonValue](decisions),
    }
    for name, value in expected.items():
        if p.get(name) != value:
            raise _BrokenError(f"statement predicate: {name} does not match the bundle content")


def _checkpoints(content: JsonObject, key: VerifyKey, hashes: list[str]) -> tuple[int, int]:
    signed = 0
    cps = _list(content.get("checkpoints"), "content.checkpoints")
    for i, raw in enumerate(cps, start=1):
        record = _obj(raw, f"checkpoint {i}")
        body = _obj(record.get("checkpoint"), f"checkpoint {i}")
        envelope = record.get("envelope")
        if envelope is not None:
            try:
                payload = verify_envelope(envelope, key)
            except SigningError as exc:
                raise _BrokenError(f"checkpoint {i}: signature {exc}") from exc
            if _obj(envelope, "envelope").get("payloadType") != CHECKPOINT_PAYLOAD_TYPE:
                raise _BrokenError(f"checkpoint {i}: not a checkpoint envelope")
            if payload != jcs(body):
                raise _BrokenError(f"checkpoint {i}: the signed checkpoint is not the one shown")
            signed += 1
        n, head = body.get("entries"), body.get("head")
        if not isinstance(n, int) or n < 0:
            raise _BrokenError(f"checkpoint {i}: no entry count")
        if n > len(hashes):
            held = len(hashes)
            raise _BrokenError(f"checkpoint {i}: anchored {n} entries; the ledger holds {held}")
        if (hashes[n - 1] if n else GENESIS) != head:
            raise _BrokenError(f"checkpoint {i}: entry {n}'s hash is not the anchored head")
    return len(cps), signed


_KEYS = {
    "the bundle": {"format", "content", "digests", "envelope"},
    "the envelope": {"payloadType", "payload", "signatures"},
    "a signature": {"keyid", "sig"},
}


def _only(value: JsonObject, what: str) -> None:
    extra, missing = set(value) - _KEYS[what], _KEYS[what] - set(value)
    if extra or missing:
        said = ", ".join([*(f"{k!r} is not covered" for k in sorted(extra)),
                          *(f"{k!r} is missing" for k in sorted(missing))])  # fmt: skip
        raise _BrokenError(f"bundle: in {what}, {said}")


def _covered(raw: bytes, bundle: JsonObject) -> None:
    """Step 1's coverage: nothing in the file that the checks after it do not read."""
    _only(bundle, "the bundle")
    envelope = _obj(bundle.get("envelope"), "the envelope")
    _only(envelope, "the envelope")
    signatures = _list(envelope.get("signatures"), "the envelope's signatures")
    if len(signatures) != 1:
        raise _BrokenError(f"bundle: {len(signatures)} signatures where the exporter makes one")
    _only(_obj(signatures[0], "a signature"), "a signature")
    if raw != bundle_bytes(bundle):
        raise _BrokenError(
            "bundle: its bytes are not the exporter's spelling of what they hold (a space,"
            " an escape or a repeated key was changed)"
        )


def verify_bundle(raw: bytes, key: VerifyKey) -> BundleReport:
    """Every check of the module docstring, in order; the first failure named."""
    facts: dict[str, JsonValue] = {}
    try:
        try:
            bundle = json.loads(raw)
        except ValueError as exc:
            raise _BrokenError("bundle: not JSON") from exc
        bundle = _obj(bundle, "the bundle")
        if bundle.get("format") not in (BUNDLE_FORMAT, LEGACY_FORMAT):
            raise _BrokenError(f"bundle: format is not {BUNDLE_FORMAT} (or {LEGACY_FORMAT})")
        _covered(raw, bundle)
        statement = _statement(_obj(bundle.get("envelope"), "the envelope"), key)
        facts["signed_by"] = key.keyid
        content = _obj(bundle.get("content"), "content")
        facts["plan_digest"] = _plan(content)
        hashes = _ledger(content)
        facts.update(entries=len(hashes), chain_head=hashes[-1] if hashes else GENESIS)
        subject = _list(statement.get("subject"), "statement subject")
        digest = _obj(_obj(subject[0], "subject").get("digest"), "subject digest").get("sha256")
        if digest != jcs_digest(content):
            raise _BrokenError("statement subject digest does not match the bundle content")
        stated = {"content": {"sha256": digest, "canonicalization": RFC8785}}
        if bundle.get("digests") != stated:
            raise _BrokenError("digests: the block is not the one the signed content gives")
        _predicate(statement, content, hashes)
        signed_format = _obj(statement.get("predicate"), "predicate").get(
            "bundle_format", LEGACY_FORMAT
        )
        if signed_format != bundle.get("format"):
            raise _BrokenError(f"bundle: format is not the signed one ({signed_format})")
        facts["run_id"] = _obj(content.get("run"), "content.run").get("run_id")
        facts["trace_digest"] = _obj(content.get("run"), "content.run").get("trace_digest")
        count, signed = _checkpoints(content, key, hashes)
        facts.update(checkpoints=count, signed_checkpoints=signed)
    except _BrokenError as exc:
        return BundleReport(False, str(exc), facts)
    return BundleReport(True, None, facts)
