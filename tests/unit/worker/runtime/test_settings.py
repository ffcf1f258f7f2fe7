"""Worker settings that can be wrong: the OPA signing key pair, a submitter's share."""

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


@pytest.mark.parametrize(
    ("concurrency", "share"), [(None, 12), ("16", 12), ("4", 3), ("3", 3), ("1", 1), ("40", 30)]
)
def test_a_submitters_share_is_all_but_a_quarter_unless_told(
    concurrency: str | None, share: int
) -> None:
    env = {} if concurrency is None else {"GATEHOUSE_WORKER_CONCURRENCY": concurrency}
    assert WorkerSettings.from_env(env).worker_share == share
    told = WorkerSettings.from_env({**env, "GATEHOUSE_WORKER_SHARE": "1"})
    assert told.worker_share == 1


@pytest.mark.parametrize("share", ["0", "17", "-1", "half"])
def test_a_share_outside_the_slots_is_refused(share: str) -> None:
    with pytest.raises(GatehouseError) as refused:
        WorkerSettings.from_env({"GATEHOUSE_WORKER_SHARE": share})
    assert refused.value.code is ErrorCode.INVALID_REQUEST
    assert "GATEHOUSE_WORKER_SHARE" in refused.value.message
