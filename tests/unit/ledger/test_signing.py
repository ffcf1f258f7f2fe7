"""The evidence signing keys: Ed25519 and ECDSA P-256 sign and verify DSSE envelopes;
other keys are refused; a signature is named as another key's or as not verifying."""

from __future__ import annotations

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa

from ledger.signing import (
    SigningError,
    load_signing_key,
    load_verify_key,
    sign_envelope,
    verify_envelope,
)


def _pem(key: ed25519.Ed25519PrivateKey | ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


@pytest.mark.parametrize(
    "make", [ed25519.Ed25519PrivateKey.generate, lambda: ec.generate_private_key(ec.SECP256R1())]
)
def test_a_supported_key_signs_and_verifies(make: object) -> None:
    assert callable(make)
    key = load_signing_key(_pem(make()))
    envelope = sign_envelope(key, "application/x-test", {"b": 1, "a": [1.0, "x"]})
    public = key.public.key._crypto_key().public_bytes(  # the public half, as a PEM file holds it
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    assert verify_envelope(envelope, load_verify_key(public)) == b'{"a":[1,"x"],"b":1}'
    other = load_signing_key(_pem(ed25519.Ed25519PrivateKey.generate()))
    with pytest.raises(SigningError, match="not made by the given key"):
        verify_envelope(envelope, other.public)
    envelope["payload"] = "eyJhIjoyfQ=="  # {"a":2}
    with pytest.raises(SigningError, match="does not verify"):
        verify_envelope(envelope, key.public)


def test_other_keys_are_refused() -> None:
    with pytest.raises(SigningError, match="neither an Ed25519 nor an ECDSA P-256"):
        load_signing_key(_pem(ec.generate_private_key(ec.SECP384R1())))
    with pytest.raises(SigningError, match="neither"):
        load_signing_key(_pem(rsa.generate_private_key(public_exponent=65537, key_size=2048)))
    with pytest.raises(SigningError, match="not an unencrypted PEM private key"):
        load_signing_key(b"not a key")
