"""The trust store: a folder of PEM certificates, and the signer check against it.

A signer is trusted when its certificate is in the store, or is issued (the
issuer's signature verified) by a CA certificate in the store, possibly through
CA certificates carried in the signature block. Every certificate on the way
must be within its validity period; an expired one refuses the archive.
"""

from __future__ import annotations

import datetime as dt
import os
import re
from collections.abc import Sequence
from pathlib import Path

from cryptography import x509
from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import hashes, serialization
from pydantic import BaseModel, ConfigDict

from contracts import ErrorCode, GatehouseError
from opa_format._model import Signer
from opa_format._refuse import refuse

__all__ = [
    "DEFAULT_TRUST_DIR",
    "TrustStore",
    "TrustedCertificate",
    "fingerprint",
    "trust_add",
    "trust_list",
    "trust_remove",
]

DEFAULT_TRUST_DIR = "var/opa-trust"
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
_MAX_CHAIN = 5


def fingerprint(cert: x509.Certificate) -> str:
    return cert.fingerprint(hashes.SHA256()).hex()


class TrustedCertificate(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    subject: str
    issuer: str
    fingerprint_sha256: str
    not_after: str
    is_ca: bool


def _is_ca(cert: x509.Certificate) -> bool:
    try:
        return bool(cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca)
    except x509.ExtensionNotFound:
        return False


def _describe(name: str, cert: x509.Certificate) -> TrustedCertificate:
    return TrustedCertificate(
        name=name,
        subject=cert.subject.rfc4514_string(),
        issuer=cert.issuer.rfc4514_string(),
        fingerprint_sha256=fingerprint(cert),
        not_after=cert.not_valid_after_utc.isoformat(),
        is_ca=_is_ca(cert),
    )


class TrustStore:
    """The certificates archives may be signed under (directly or through a CA)."""

    def __init__(self, certificates: Sequence[x509.Certificate] = ()) -> None:
        self._by_fp = {fingerprint(c): c for c in certificates}

    @classmethod
    def load(cls, folder: Path) -> TrustStore:
        """Every ``*.pem`` in ``folder``; a missing folder is an empty store."""
        certs: list[x509.Certificate] = []
        if folder.is_dir():
            for path in sorted(folder.glob("*.pem")):
                certs.extend(x509.load_pem_x509_certificates(path.read_bytes()))
        return cls(certs)

    def __len__(self) -> int:
        return len(self._by_fp)

    def verify(
        self, signer: x509.Certificate, carried: Sequence[x509.Certificate], now: dt.datetime
    ) -> Signer:
        """The signer, if the store vouches for it now; ``opa_signer_untrusted`` otherwise."""
        _check_usage(signer)
        current = signer
        seen = {fingerprint(signer)}
        for _ in range(_MAX_CHAIN):
            _check_period(current, now)
            fp = fingerprint(current)
            if fp in self._by_fp:
                return _signer(signer, fp)
            issuer = self._issuer_of(current, [*self._by_fp.values(), *carried], seen)
            if issuer is None:
                break
            issuer_fp = fingerprint(issuer)
            if issuer_fp in self._by_fp:
                _check_period(issuer, now)
                return _signer(signer, issuer_fp)
            seen.add(issuer_fp)
            current = issuer
        refuse(
            ErrorCode.OPA_SIGNER_UNTRUSTED,
            f"the signer {signer.subject.rfc4514_string()!r} is not in the trust store nor"
            " issued by a CA in it",
            reason="unknown",
            subject=signer.subject.rfc4514_string(),
            fingerprint_sha256=fingerprint(signer),
        )

    @staticmethod
    def _issuer_of(
        cert: x509.Certificate, candidates: list[x509.Certificate], seen: set[str]
    ) -> x509.Certificate | None:
        for candidate in candidates:
            if fingerprint(candidate) in seen or candidate.subject != cert.issuer:
                continue
            if not _is_ca(candidate):
                continue
            try:
                cert.verify_directly_issued_by(candidate)
            except (ValueError, TypeError, InvalidSignature, UnsupportedAlgorithm):
                continue
            return candidate
        return None


def _check_usage(cert: x509.Certificate) -> None:
    try:
        usage = cert.extensions.get_extension_for_class(x509.KeyUsage).value
    except x509.ExtensionNotFound:
        return
    if not usage.digital_signature:
        refuse(
            ErrorCode.OPA_SIGNER_UNTRUSTED,
            "the signer's certificate is not for digital signatures",
            reason="key_usage",
        )


def _check_period(cert: x509.Certificate, now: dt.datetime) -> None:
    if now < cert.not_valid_before_utc or now > cert.not_valid_after_utc:
        late = now > cert.not_valid_after_utc
        refuse(
            ErrorCode.OPA_SIGNER_UNTRUSTED,
            f"certificate {cert.subject.rfc4514_string()!r} is "
            + ("expired" if late else "not yet valid")
            + f" (valid {cert.not_valid_before_utc.isoformat()} to"
            f" {cert.not_valid_after_utc.isoformat()})",
            reason="expired" if late else "not_yet_valid",
            subject=cert.subject.rfc4514_string(),
        )


def _signer(cert: x509.Certificate, trusted_by: str) -> Signer:
    return Signer(
        subject=cert.subject.rfc4514_string(),
        issuer=cert.issuer.rfc4514_string(),
        serial=format(cert.serial_number, "x"),
        fingerprint_sha256=fingerprint(cert),
        not_before=cert.not_valid_before_utc.isoformat(),
        not_after=cert.not_valid_after_utc.isoformat(),
        trusted_by=trusted_by,
    )


# --- managing the folder (gatehouse opa trust add|list|remove) -------------------------------


def _bad_request(message: str) -> GatehouseError:
    return GatehouseError(ErrorCode.INVALID_REQUEST, message)


def trust_list(folder: Path) -> list[TrustedCertificate]:
    out: list[TrustedCertificate] = []
    if folder.is_dir():
        for path in sorted(folder.glob("*.pem")):
            out.extend(
                _describe(path.stem, c) for c in x509.load_pem_x509_certificates(path.read_bytes())
            )
    return out


def trust_add(folder: Path, pem: bytes, name: str | None = None) -> TrustedCertificate:
    """Store one PEM certificate as ``<folder>/<name>.pem`` (name: its fingerprint's head)."""
    try:
        certs = x509.load_pem_x509_certificates(pem)
    except ValueError as exc:
        raise _bad_request(f"not a PEM certificate: {exc}") from exc
    if len(certs) != 1:
        raise _bad_request(f"expected one certificate, found {len(certs)}")
    cert = certs[0]
    fp = fingerprint(cert)
    chosen = name or fp[:16]
    if not _NAME.fullmatch(chosen):
        raise _bad_request(f"invalid name {chosen!r}: letters, digits, '.', '_', '-'")
    existing = trust_list(folder)
    if any(t.fingerprint_sha256 == fp for t in existing):
        raise _bad_request(f"certificate {fp} is already trusted")
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    target = folder / f"{chosen}.pem"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(target, flags, 0o644)
    except FileExistsError as exc:
        raise _bad_request(f"a certificate named {chosen!r} is already trusted") from exc
    with os.fdopen(fd, "wb") as out:
        out.write(cert.public_bytes(serialization.Encoding.PEM))
    return _describe(chosen, cert)


def trust_remove(folder: Path, name_or_fingerprint: str) -> TrustedCertificate:
    key = name_or_fingerprint.lower().replace(":", "")
    for entry in trust_list(folder):
        if entry.name == name_or_fingerprint or entry.fingerprint_sha256 == key:
            (folder / f"{entry.name}.pem").unlink()
            return entry
    raise _bad_request(f"no trusted certificate is named {name_or_fingerprint!r}")
