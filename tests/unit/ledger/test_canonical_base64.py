"""A bundle's base64 is taken in its one canonical spelling only.

A base64 decoder ignores the unused low bits of a final character and accepts
padding where none belongs, so a signed bundle could be changed (one character
of a signature or payload) and still verify. Every base64 field of a signed
bundle is spelled every other way that decodes to the same bytes: each spelling
is refused, naming the field."""

from __future__ import annotations

import base64
import copy
import functools
import json
import string
from collections.abc import Callable, Iterator

import pytest
from cryptography.hazmat.primitives.asymmetric import ed25519
from securesystemslib.signer import CryptoSigner

from contracts import JsonObject, JsonValue, digest_of
from ledger.anchors import CHECKPOINT_PAYLOAD_TYPE, CHECKPOINT_TYPE
from ledger.bundle import (
    BUNDLE_FORMAT,
    STATEMENT_PAYLOAD_TYPE,
    bundle_bytes,
    predicate_of,
    statement_of,
)
from ledger.bundle_verify import verify_bundle
from ledger.chain import GENESIS
from ledger.signing import (
    RFC8785,
    SigningError,
    SigningKey,
    jcs_digest,
    sign_envelope,
    verify_envelope,
)

_ALPHABET = string.ascii_uppercase + string.ascii_lowercase + string.digits + "+/"


def _key() -> SigningKey:
    return SigningKey(CryptoSigner(ed25519.Ed25519PrivateKey.generate()))


def _bundle(key: SigningKey) -> JsonObject:
    """A small bundle as ``export_bundle`` builds it: a run with one plan revision,
    no calls, and a signed checkpoint of its (empty) chain."""
    plan: JsonObject = {"steps": [{"id": "echo", "kind": "echo", "args": {"k": 1}}]}
    plan_digest = digest_of(plan)
    checkpoint: JsonObject = {
        "_type": CHECKPOINT_TYPE, "run_id": "run-1", "entries": 0, "head": GENESIS,
        "recorded_at": "2026-12-01T00:00:00.000000+00:00", "executor_id": "w1",
        "chain_canonicalization": "gatehouse-json-v1",
    }  # fmt: skip
    content: JsonObject = {
        "run": {
            "run_id": "run-1", "status": "succeeded", "plan_digest": plan_digest,
            "trace_digest": None, "profile_digest": None, "tool_pool_digest": None,
        },
        "plan": {
            "plan_digest": plan_digest,
            "revisions": [
                {"revision": 1, "plan_json": json.dumps(plan), "plan_digest": plan_digest}
            ],
        },
        "decisions": [],
        "ledger": {"entries": [], "count": 0, "head": GENESIS},
        "checkpoints": [
            {"checkpoint": checkpoint,
             "envelope": sign_envelope(key, CHECKPOINT_PAYLOAD_TYPE, checkpoint)},
        ],
    }  # fmt: skip
    return _sealed(content, key)


def _sealed(content: JsonObject, key: SigningKey) -> JsonObject:
    """The bundle of ``content``, its digest and Statement signed as the exporter does."""
    digest = jcs_digest(content)
    statement = statement_of("run-1", digest, predicate_of(content, "2026-12-01T00:00:01Z"))
    return {
        "format": BUNDLE_FORMAT,
        "content": content,
        "digests": {"content": {"sha256": digest, "canonicalization": RFC8785}},
        "envelope": sign_envelope(key, STATEMENT_PAYLOAD_TYPE, statement),
    }


def _envelopes(bundle: JsonObject) -> Iterator[tuple[str, JsonObject]]:
    """Every DSSE envelope of the bundle, named."""
    envelope = bundle["envelope"]
    assert isinstance(envelope, dict)
    yield "the statement", envelope
    content = bundle["content"]
    assert isinstance(content, dict) and isinstance(content["checkpoints"], list)
    for i, record in enumerate(content["checkpoints"], start=1):
        assert isinstance(record, dict) and isinstance(record["envelope"], dict)
        yield f"checkpoint {i}", record["envelope"]


def _fields(envelope: JsonObject) -> Iterator[tuple[str, Callable[[JsonObject], JsonObject]]]:
    """(name, the object holding it) for each base64 field of an envelope: the payload
    and every signature's sig."""
    yield "payload", _itself
    sigs = envelope["signatures"]
    assert isinstance(sigs, list)
    for i in range(len(sigs)):
        yield "sig", functools.partial(_signature, i=i)


def _itself(envelope: JsonObject) -> JsonObject:
    return envelope


def _signature(envelope: JsonObject, i: int) -> JsonObject:
    return _at(envelope["signatures"], i)


def _at(items: JsonValue, i: int) -> JsonObject:
    assert isinstance(items, list)
    item = items[i]
    assert isinstance(item, dict)
    return item


def _other_spellings(canonical: str) -> list[str]:
    """Every other spelling the standard decoder, even with ``validate=True``, reads as
    the same bytes: the last data character with other unused bits, and padding
    added where the encoder writes less (or none)."""
    raw = base64.b64decode(canonical)
    body = canonical.rstrip("=")
    variants = set()
    for c in _ALPHABET:
        candidate = body[:-1] + c + canonical[len(body) :]
        try:
            if base64.b64decode(candidate, validate=True) == raw:
                variants.add(candidate)
        except ValueError:
            continue
    for extra in ("=", "==", "===", "===="):
        candidate = canonical + extra
        try:
            if base64.b64decode(candidate, validate=True) == raw:
                variants.add(candidate)
        except ValueError:
            continue
    variants.discard(canonical)
    return sorted(variants)


def test_every_base64_field_has_other_spellings_to_try() -> None:
    """The enumeration is not empty: an Ed25519 signature (64 bytes) ends in four unused
    bits, so each sig has fifteen other spellings; each envelope has padding variants."""
    bundle = _bundle(_key())
    for where, envelope in _envelopes(bundle):
        sig = _at(envelope["signatures"], 0)["sig"]
        assert isinstance(sig, str) and len(_other_spellings(sig)) >= 15, where
        payload = envelope["payload"]
        assert isinstance(payload, str) and _other_spellings(payload), where


def test_the_canonical_bundle_verifies() -> None:
    key = _key()
    report = verify_bundle(bundle_bytes(_bundle(key)), key.public)
    assert report.ok, report.problem
    assert report.facts["signed_checkpoints"] == 1


def test_every_other_spelling_of_every_base64_field_is_refused() -> None:
    """The Statement's envelope spelled otherwise in the file; a checkpoint's envelope
    spelled otherwise where it is kept (the database), then exported and signed by an
    honest exporter, so only the spelling itself can give it away."""
    key = _key()
    pristine = _bundle(key)
    tried = 0
    for where, envelope in _envelopes(pristine):
        for name, holder in _fields(envelope):
            canonical = holder(envelope)[name]
            assert isinstance(canonical, str)
            for spelling in _other_spellings(canonical):
                forged = copy.deepcopy(pristine)
                holder(dict(_envelopes(forged))[where])[name] = spelling
                if where != "the statement":
                    content = forged["content"]
                    assert isinstance(content, dict)
                    forged = _sealed(content, key)
                report = verify_bundle(bundle_bytes(forged), key.public)
                assert not report.ok, (where, name, spelling)
                assert "not canonical base64" in str(report.problem), (where, name, report)
                tried += 1
    assert tried >= 2 * 15  # at least every sig's bit variants were tried


@pytest.mark.parametrize("spelling", ["QR==", "QUJD=", "QUJD====", "QQ", "QQ===", "Q Q=="])
def test_an_envelope_with_a_non_canonical_payload_is_refused(spelling: str) -> None:
    key = _key()
    envelope = sign_envelope(key, "application/x-test", {"a": 1})
    envelope["payload"] = spelling
    with pytest.raises(SigningError, match="base64"):
        verify_envelope(envelope, key.public)
