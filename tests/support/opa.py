"""Helpers for runs from OPA archives: build an archive, submit it through the shim."""

from __future__ import annotations

import base64
import hashlib
import io
import zipfile
from collections.abc import Callable

import opa
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from tests.support.stack import Stack

__all__ = ["OPA_MEDIA", "DigestManifest", "batch_archive", "opa_signed", "submit_archive"]

OPA_MEDIA = "application/vnd.opa+zip"


def batch_archive(prompt: str, data: dict[str, bytes], *, mode: str = "batch") -> bytes:
    """An unsigned archive (batch unless said otherwise), as the opa-archive library writes it."""
    archive = opa.OpaArchive(
        manifest=opa.Manifest(title="e2e", execution_mode=opa.ExecutionMode(mode)),
        prompt=opa.Prompt(prompt),
    )
    for name, content in data.items():
        archive.add_data_bytes(name, content)
    out: bytes = archive.to_bytes()
    return out


def submit_archive(
    stack: Stack, data: bytes, name: str, *, recipe: str, profile: str, **query: str
) -> str:
    """``POST /intent`` with the archive, as ``gatehouse opa run`` sends it; the run id."""
    params = {"name": name, "recipe": recipe, "policy_profile": profile} | query
    r = stack.client.post(
        "/intent", content=data, params=params, headers={"Content-Type": OPA_MEDIA}
    )
    assert r.status_code == 202, r.text
    run_id: str = r.json()["run_id"]
    return run_id


class DigestManifest(opa.Manifest):  # type: ignore[misc]  # opa-archive ships no types
    """opa-archive's manifest plus JAR per-entry sections (Name + SHA-256-Digest): the
    library signs only the manifest, so without these its signature covers no file."""

    def __init__(self, digests: dict[str, bytes], **kw: object) -> None:
        super().__init__(**kw)
        self._files = digests

    def serialize(self) -> str:
        main: str = super().serialize()
        sections = "".join(
            f"Name: {name}\r\nSHA-256-Digest: "
            f"{base64.b64encode(hashlib.sha256(data).digest()).decode()}\r\n\r\n"
            for name, data in sorted(self._files.items())
        )
        return main + "\r\n" + sections


def opa_signed(
    build: Callable[[opa.Manifest | None], opa.OpaArchive],
    key: rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey,
    certificate: x509.Certificate,
    **manifest: object,
) -> bytes:
    """An archive opa-archive builds (``build(manifest)``) and signs with its own signer,
    its manifest listing every file's digest."""
    plain = zipfile.ZipFile(io.BytesIO(build(None).to_bytes()))
    files = {n: plain.read(n) for n in plain.namelist() if n != "META-INF/MANIFEST.MF"}
    signer = opa.Signer(private_key=key, certificate=certificate)
    signed: bytes = signer.sign_bytes(build(DigestManifest(files, **manifest)).to_bytes())
    return signed
