"""Signed archives for the corpus, and ways to tamper with them after signing."""

from __future__ import annotations

import base64
import hashlib
import io
import zipfile

from asn1crypto import algos, cms
from asn1crypto import x509 as asn1_x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa
from cryptography.hazmat.primitives.serialization import pkcs7

from opa_format import History, Manifest, SigningKey, write_archive
from tests.security.opa._build import HISTORY_OK, files_zip

SF = "META-INF/SIGNATURE.SF"


def signed_archive(key: SigningKey, **files: bytes) -> bytes:
    return write_archive(
        prompt="Summarise data/notes.txt.\n",
        manifest=Manifest(title="signed corpus"),
        history=History.model_validate_json(HISTORY_OK),
        files={"data/notes.txt": b"three notes\n", **files},
        signing_key=key,
    )


def contents(archive: bytes) -> dict[str, bytes]:
    with zipfile.ZipFile(io.BytesIO(archive)) as z:
        return {n: z.read(n) for n in z.namelist()}


def rezip(files: dict[str, bytes]) -> bytes:
    return files_zip(files)


def b64(data: bytes, algorithm: str = "sha256") -> str:
    return base64.b64encode(hashlib.new(algorithm, data).digest()).decode()


def resign(
    files: dict[str, bytes],
    key: SigningKey,
    *,
    sf: bytes | None = None,
    digest: hashes.HashAlgorithm | None = None,
    block_name: str = "META-INF/SIGNATURE.RSA",
) -> bytes:
    """Replace the .SF (default: a correct one) and sign it again with ``digest``."""
    out = {n: d for n, d in files.items() if not n.startswith("META-INF/SIGNATURE.")}
    manifest = files["META-INF/MANIFEST.MF"]
    body = sf or (
        b"Signature-Version: 1.0\r\nSHA-256-Digest-Manifest: " + b64(manifest).encode() + b"\r\n"
    )
    if isinstance(digest, hashes.SHA1):
        block = sha1_block(body, key)
    else:
        block = _block(body, key, digest or hashes.SHA256())
    out[SF] = body
    out[block_name] = block
    return rezip(out)


def _block(body: bytes, key: SigningKey, digest: hashes.HashAlgorithm) -> bytes:
    return (
        pkcs7.PKCS7SignatureBuilder()
        .set_data(body)
        .add_signer(key.certificate, key.private_key, digest)  # type: ignore[arg-type]  # SHA-2 only here
        .sign(
            serialization.Encoding.DER,
            [pkcs7.PKCS7Options.Binary, pkcs7.PKCS7Options.DetachedSignature],
        )
    )


def sha1_block(body: bytes, key: SigningKey) -> bytes:
    """A PKCS#7 block signed with SHA-1, which cryptography refuses to build: made by hand."""
    assert isinstance(key.private_key, rsa.RSAPrivateKey)
    signature = key.private_key.sign(body, padding.PKCS1v15(), hashes.SHA1())
    cert = asn1_x509.Certificate.load(key.certificate.public_bytes(serialization.Encoding.DER))
    signer = cms.SignerInfo(
        {
            "version": "v1",
            "sid": cms.SignerIdentifier(
                {
                    "issuer_and_serial_number": cms.IssuerAndSerialNumber(
                        {"issuer": cert.issuer, "serial_number": cert.serial_number}
                    )
                }
            ),
            "digest_algorithm": algos.DigestAlgorithm({"algorithm": "sha1"}),
            "signature_algorithm": algos.SignedDigestAlgorithm({"algorithm": "rsassa_pkcs1v15"}),
            "signature": signature,
        }
    )
    signed = cms.SignedData(
        {
            "version": "v1",
            "digest_algorithms": [algos.DigestAlgorithm({"algorithm": "sha1"})],
            "encap_content_info": {"content_type": "data"},
            "certificates": [cert],
            "signer_infos": [signer],
        }
    )
    return bytes(cms.ContentInfo({"content_type": "signed_data", "content": signed}).dump())
