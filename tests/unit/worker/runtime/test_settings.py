"""Worker settings that can be wrong: the OPA signing key pair."""

from __future__ import annotations

from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization

from contracts import ErrorCode, GatehouseError
from tests.security.opa._build import make_pki
from worker.runtime import WorkerSettings


def test_no_signing_key_signs_nothing() -> None:
    assert WorkerSettings.from_env({}).opa_signing_key is None


def test_the_signing_key_needs_its_certificate(tmp_path: Path) -> None:
    pki = make_pki()
    key = tmp_path / "key.pem"
    key.write_bytes(
        pki.signer.private_key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    cert = tmp_path / "cert.pem"
    cert.write_bytes(pki.signer.certificate.public_bytes(serialization.Encoding.PEM))
    both = {"GATEHOUSE_OPA_SIGNING_KEY": str(key), "GATEHOUSE_OPA_SIGNING_CERT": str(cert)}
    loaded = WorkerSettings.from_env(both).opa_signing_key
    assert loaded is not None and loaded.certificate == pki.signer.certificate
    for half in (
        {"GATEHOUSE_OPA_SIGNING_KEY": str(key)},
        {"GATEHOUSE_OPA_SIGNING_CERT": str(cert)},
    ):
        with pytest.raises(GatehouseError) as refused:
            WorkerSettings.from_env(half)
        assert refused.value.code is ErrorCode.INVALID_REQUEST
        assert "both" in refused.value.message
    swapped = {"GATEHOUSE_OPA_SIGNING_KEY": str(cert), "GATEHOUSE_OPA_SIGNING_CERT": str(key)}
    with pytest.raises(GatehouseError) as unusable:
        WorkerSettings.from_env(swapped)
    assert "unusable" in unusable.value.message
    missing = {**both, "GATEHOUSE_OPA_SIGNING_KEY": str(tmp_path / "absent.pem")}
    with pytest.raises(GatehouseError):
        WorkerSettings.from_env(missing)
