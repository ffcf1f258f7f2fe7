"""The PKCS#7 (CMS) signature block over the ``.SF`` file: verify, and sign.

``cryptography`` (50) signs PKCS#7 but does not verify it, so the SignedData is
parsed with ``asn1crypto`` and every check is done here with ``cryptography``
primitives: one signer; SHA-256 or stronger (MD5 and SHA-1 are refused);
encapsulated content, when present, equal to the ``.SF``; with signed
attributes, content type ``data`` and a message digest equal to the ``.SF``'s,
and the signature over the attributes' DER as a SET; without them, the
signature over the ``.SF`` itself. This is what opa-archive produces (attached,
with attributes) and what ``jarsigner`` produces (detached).
"""

from __future__ import annotations

import hashlib
import warnings
from dataclasses import dataclass
from typing import NoReturn

from asn1crypto import cms  # no type information: every value read is converted and checked
from cryptography import x509
from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import dsa, ec, padding, rsa
from cryptography.hazmat.primitives.serialization import pkcs7
from cryptography.utils import CryptographyDeprecationWarning

from contracts import ErrorCode
from opa_format._refuse import refuse

__all__ = ["BlockSignature", "SigningKey", "sign_block", "verify_block"]

_HASHES: dict[str, type[hashes.HashAlgorithm]] = {
    "sha256": hashes.SHA256,
    "sha384": hashes.SHA384,
    "sha512": hashes.SHA512,
}
_WEAK = ("md2", "md5", "sha1")
# cryptography 51 deprecates DSA, and says so on every use of it, printed on stderr of
# every command that imports this module. The archive format still allows a ``.DSA``
# block (as jarsigner writes one), which is verified until cryptography drops DSA;
# only that one warning is silenced.
warnings.filterwarnings(
    "ignore", message="DSA is deprecated", category=CryptographyDeprecationWarning
)
_BLOCK_KEYS = {"RSA": rsa.RSAPublicKey, "EC": ec.EllipticCurvePublicKey, "DSA": dsa.DSAPublicKey}


@dataclass(frozen=True)
class BlockSignature:
    signer: x509.Certificate
    carried: tuple[x509.Certificate, ...]  # every certificate in the block (possible intermediates)
    digest_algorithm: str


@dataclass(frozen=True)
class SigningKey:
    """A key Gatehouse signs archives with, its certificate and any intermediates."""

    private_key: rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey
    certificate: x509.Certificate
    chain: tuple[x509.Certificate, ...] = ()

    @classmethod
    def from_pem(cls, key_pem: bytes, cert_pem: bytes) -> SigningKey:
        key = serialization.load_pem_private_key(key_pem, password=None)
        if not isinstance(key, rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey):
            raise ValueError("the signing key must be an RSA or EC private key")
        certs = x509.load_pem_x509_certificates(cert_pem)
        return cls(key, certs[0], tuple(certs[1:]))

    @property
    def block_extension(self) -> str:
        return "EC" if isinstance(self.private_key, ec.EllipticCurvePrivateKey) else "RSA"


def _invalid(message: str) -> NoReturn:
    refuse(ErrorCode.OPA_SIGNATURE_INVALID, message)


def _weak(message: str) -> NoReturn:
    refuse(ErrorCode.OPA_SIGNATURE_WEAK, message)


def verify_block(block: bytes, block_ext: str, content: bytes) -> BlockSignature:
    """Check that ``block`` is a valid signature of ``content``; returns who signed."""
    try:
        return _verify(block, block_ext, content)
    except (ValueError, TypeError, KeyError, AttributeError, IndexError, OverflowError) as exc:
        # asn1crypto parses lazily: malformed DER surfaces wherever a field is first read.
        refuse(ErrorCode.OPA_SIGNATURE_INVALID, f"the signature block is malformed: {exc}")


def _verify(block: bytes, block_ext: str, content: bytes) -> BlockSignature:
    info = cms.ContentInfo.load(block, strict=True)
    if info["content_type"].native != "signed_data":
        _invalid("the signature block is not PKCS#7 SignedData")
    signed = info["content"]
    signer_infos = list(signed["signer_infos"])
    raw_certs = [bytes(c.chosen.dump()) for c in signed["certificates"] if c.name == "certificate"]
    encap = signed["encap_content_info"]
    encap_type = str(encap["content_type"].native)
    encap_content = encap["content"].native
    if len(signer_infos) != 1:
        _invalid(f"the signature block has {len(signer_infos)} signers; exactly one is read")
    if encap_type != "data":
        _invalid("the signature block does not sign plain data")
    if encap_content is not None and bytes(encap_content) != content:
        _invalid("the signature block carries other content than the .SF file")
    si = signer_infos[0]
    digest_name = str(si["digest_algorithm"]["algorithm"].native)
    sig_name = str(si["signature_algorithm"]["algorithm"].native)
    if digest_name in _WEAK or any(w in sig_name for w in _WEAK):
        _weak(f"the signature block uses {digest_name}/{sig_name}; SHA-256 or stronger is required")
    if digest_name not in _HASHES:
        _invalid(f"the signature block uses an unsupported digest {digest_name}")
    algorithm = _HASHES[digest_name]()
    carried = tuple(x509.load_der_x509_certificate(c) for c in raw_certs)
    signer = _find_signer(si, carried)
    attrs = si["signed_attrs"]
    if attrs.native:
        found: dict[str, object] = {str(a["type"].native): a["values"].native for a in attrs}
        if found.get("content_type") != ["data"]:
            _invalid("the signed attributes do not name content type data")
        digest = hashlib.new(digest_name, content).digest()
        if found.get("message_digest") != [digest]:
            _invalid("the signed message digest does not match the .SF file")
        dumped = bytes(attrs.dump())
        to_verify = b"\x31" + dumped[1:]  # signed over as a SET OF, not as [0] IMPLICIT
    else:
        to_verify = content
    signature = bytes(si["signature"].native)
    key = signer.public_key()
    expected = _BLOCK_KEYS.get(block_ext)
    if expected is None or not isinstance(key, expected):
        _invalid(f"a .{block_ext} block holds a {type(key).__name__} signature")
    try:
        if isinstance(key, rsa.RSAPublicKey):
            if "pss" in sig_name:
                _invalid("RSASSA-PSS signature blocks are not read")
            key.verify(signature, to_verify, padding.PKCS1v15(), algorithm)
        elif isinstance(key, ec.EllipticCurvePublicKey):
            key.verify(signature, to_verify, ec.ECDSA(algorithm))
        elif isinstance(key, dsa.DSAPublicKey):
            key.verify(signature, to_verify, algorithm)
    except (InvalidSignature, UnsupportedAlgorithm) as exc:
        refuse(ErrorCode.OPA_SIGNATURE_INVALID, f"the signature does not verify ({exc!r})")
    return BlockSignature(signer, carried, digest_name)


def _find_signer(si: cms.SignerInfo, carried: tuple[x509.Certificate, ...]) -> x509.Certificate:
    sid = si["sid"]
    if sid.name == "issuer_and_serial_number":
        issuer = bytes(sid.chosen["issuer"].dump())
        serial = int(sid.chosen["serial_number"].native)
        for cert in carried:
            if cert.serial_number == serial and cert.issuer.public_bytes() == issuer:
                return cert
    else:
        ski = bytes(sid.chosen.native)
        for cert in carried:
            try:
                ext = cert.extensions.get_extension_for_class(x509.SubjectKeyIdentifier)
            except x509.ExtensionNotFound:
                continue
            if ext.value.digest == ski:
                return cert
    refuse(ErrorCode.OPA_SIGNATURE_INVALID, "the signer's certificate is not in the block")


def sign_block(content: bytes, key: SigningKey) -> bytes:
    """A detached PKCS#7 signature of ``content`` (SHA-256), as ``jarsigner`` writes it."""
    builder = pkcs7.PKCS7SignatureBuilder().set_data(content)
    builder = builder.add_signer(key.certificate, key.private_key, hashes.SHA256())
    for cert in key.chain:
        builder = builder.add_certificate(cert)
    return builder.sign(
        serialization.Encoding.DER,
        [pkcs7.PKCS7Options.Binary, pkcs7.PKCS7Options.DetachedSignature],
    )
