"""Signing what Gatehouse attests: RFC 8785 bytes in a DSSE envelope.

The deployment's key is an Ed25519 or ECDSA P-256 private key in a PEM file
(``GATEHOUSE_SIGNING_KEY``, or ``--key``). What is signed is always the
RFC 8785 (JSON Canonicalization Scheme) spelling of a JSON value, wrapped in
a DSSE envelope: the signature is over ``PAE(payloadType, payload)``, so any
DSSE tool, or ``openssl pkeyutl`` given the PAE bytes, checks it
(docs/security.md, "Evidence bundles").

Pure code: no database. ``securesystemslib`` does the envelope and the
signature; its exceptions are translated here, once, into ``SigningError``.
"""

from __future__ import annotations

import base64
import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

import rfc8785
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519
from securesystemslib.dsse import Envelope
from securesystemslib.exceptions import UnverifiedSignatureError, VerificationError

# (the private modules: the package re-exports these without an __all__, which mypy
# --strict does not count as exporting them)
from securesystemslib.signer import CryptoSigner, Signature, SSlibKey

from contracts import JsonObject, JsonValue

__all__ = [
    "RFC8785",
    "SigningError",
    "SigningKey",
    "VerifyKey",
    "generate_key",
    "jcs",
    "jcs_digest",
    "load_signing_key",
    "load_verify_key",
    "pae",
    "sign_envelope",
    "verify_envelope",
]

# How a digest's input was spelled: the bundle's own digests use RFC 8785.
RFC8785 = "rfc8785"


class SigningError(ValueError):
    """A key that cannot be used, or an envelope that cannot be read."""


def jcs(value: JsonValue) -> bytes:
    """The RFC 8785 spelling of ``value``."""
    try:
        return rfc8785.dumps(value)
    except rfc8785.CanonicalizationError as exc:
        raise SigningError(f"not canonicalizable per RFC 8785: {exc}") from exc


def jcs_digest(value: JsonValue) -> str:
    return hashlib.sha256(jcs(value)).hexdigest()


@dataclass(frozen=True)
class VerifyKey:
    key: SSlibKey

    @property
    def keyid(self) -> str:
        return self.key.keyid


@dataclass(frozen=True)
class SigningKey:
    signer: CryptoSigner

    @property
    def public(self) -> VerifyKey:
        return VerifyKey(self.signer.public_key)


def _supported(key: object) -> bool:
    if isinstance(key, ed25519.Ed25519PrivateKey | ed25519.Ed25519PublicKey):
        return True
    if isinstance(key, ec.EllipticCurvePrivateKey | ec.EllipticCurvePublicKey):
        return isinstance(key.curve, ec.SECP256R1)
    return False


def load_signing_key(pem: bytes, where: str = "the key") -> SigningKey:
    """An Ed25519 or ECDSA P-256 private key (PEM, unencrypted)."""
    try:
        key = serialization.load_pem_private_key(pem, password=None)
    except (ValueError, TypeError) as exc:
        raise SigningError(f"{where} is not an unencrypted PEM private key") from exc
    if not _supported(key) or not isinstance(
        key, ed25519.Ed25519PrivateKey | ec.EllipticCurvePrivateKey
    ):
        raise SigningError(f"{where} is neither an Ed25519 nor an ECDSA P-256 key")
    return SigningKey(CryptoSigner(key))


def load_verify_key(pem: bytes, where: str = "the key") -> VerifyKey:
    """A public key (PEM); a private key's PEM gives its public half."""
    if b"PRIVATE KEY" in pem:
        return load_signing_key(pem, where).public
    try:
        key = serialization.load_pem_public_key(pem)
    except (ValueError, TypeError) as exc:
        raise SigningError(f"{where} is not a PEM public key") from exc
    if not _supported(key) or not isinstance(
        key, ed25519.Ed25519PublicKey | ec.EllipticCurvePublicKey
    ):
        raise SigningError(f"{where} is neither an Ed25519 nor an ECDSA P-256 key")
    return VerifyKey(SSlibKey.from_crypto(key))


def generate_key(private_path: Path, public_path: Path) -> VerifyKey:
    """A new Ed25519 key: the private PEM (mode 0600, never overwritten) and its public PEM."""
    key = ed25519.Ed25519PrivateKey.generate()
    private = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    public = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    fd = os.open(private_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(private)
    public_path.write_bytes(public)
    return VerifyKey(SSlibKey.from_crypto(key.public_key()))


def pae(payload_type: str, payload: bytes) -> bytes:
    """DSSE's pre-authentication encoding: the bytes a signature is made over."""
    return Envelope(payload, payload_type, {}).pae()


def sign_envelope(key: SigningKey, payload_type: str, value: JsonValue) -> JsonObject:
    """``value`` in RFC 8785 bytes, in a DSSE envelope signed by ``key``."""
    envelope = Envelope(jcs(value), payload_type, {})
    envelope.sign(key.signer)
    out: JsonObject = {
        "payloadType": envelope.payload_type,
        "payload": base64.b64encode(envelope.payload).decode("ascii"),
        "signatures": [
            {"keyid": s.keyid, "sig": base64.b64encode(bytes.fromhex(s.signature)).decode()}
            for s in envelope.signatures.values()
        ],
    }
    return out


def _b64(value: object, what: str) -> bytes:
    if not isinstance(value, str):
        raise SigningError(f"{what} is not a base64 string")
    try:
        raw = base64.b64decode(value, validate=True)
    except ValueError as exc:
        raise SigningError(f"{what} is not base64") from exc
    # The decoder ignores the unused low bits of the last character and accepts
    # padding where none belongs, so several spellings give the same bytes; only
    # the one spelling the encoder makes is taken, or a changed character in a
    # signed file would go unnoticed.
    if base64.b64encode(raw).decode("ascii") != value:
        raise SigningError(f"{what} is not canonical base64 (RFC 4648 section 3.5)")
    return raw


def envelope_payload(envelope: JsonValue) -> tuple[str, bytes]:
    """(payloadType, payload bytes) of a DSSE envelope, unchecked."""
    if not isinstance(envelope, dict) or not isinstance(envelope.get("payloadType"), str):
        raise SigningError("the envelope has no payloadType")
    return str(envelope["payloadType"]), _b64(envelope.get("payload"), "the payload")


def verify_envelope(envelope: JsonValue, key: VerifyKey) -> bytes:
    """The payload, if one signature of ``envelope`` is ``key``'s over the PAE; else
    ``SigningError`` saying which: not made by this key, or not over these bytes."""
    payload_type, payload = envelope_payload(envelope)
    assert isinstance(envelope, dict)
    sigs = envelope.get("signatures")
    if not isinstance(sigs, list) or not sigs:
        raise SigningError("the envelope has no signature")
    data = pae(payload_type, payload)
    keyids = []
    for i, raw in enumerate(sigs):
        if not isinstance(raw, dict):
            raise SigningError(f"signature {i} is not an object")
        keyid = raw.get("keyid")
        keyids.append(str(keyid))
        if keyid != key.keyid:
            continue
        sig = Signature(key.keyid, _b64(raw.get("sig"), f"signature {i}").hex())
        try:
            key.key.verify_signature(sig, data)
        except (UnverifiedSignatureError, VerificationError) as exc:
            raise SigningError(
                "does not verify with the given key over the envelope's payload (PAE)"
            ) from exc
        return payload
    raise SigningError(
        f"not made by the given key (signed by key id {', '.join(keyids)}; the given key's"
        f" id is {key.keyid})"
    )
