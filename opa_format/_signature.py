"""JAR-style signatures: the ``.SF`` over the manifest, the manifest over every file.

Signed means: exactly one ``META-INF/<NAME>.SF`` and one block
``META-INF/<NAME>.RSA|EC|DSA`` with the same name. The ``.SF`` must carry
``SHA-256-Digest-Manifest`` equal to the manifest's SHA-256 (this is the
authoritative digest, as in Java's verifier; per-section digests in the
``.SF`` must name sections the manifest has). The block must be a valid
PKCS#7 signature of the ``.SF`` by a signer the trust store vouches for. And
every file of the archive except the signature files must have a manifest
section with a ``SHA-256-Digest`` equal to its content's: a file missing from
the manifest was added after signing.
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import re

from contracts import ErrorCode
from opa_format._cms import verify_block
from opa_format._manifest import JarSection, parse_jar
from opa_format._model import SignatureStatus
from opa_format._refuse import refuse
from opa_format._trust import TrustStore

__all__ = ["MANIFEST", "is_signature_file", "verify_archive_signature"]

MANIFEST = "META-INF/MANIFEST.MF"
BLOCK_EXTENSIONS = ("RSA", "EC", "DSA")
_WEAK_DIGEST = re.compile(r"(?i)^(md2|md5|sha1|sha-1)-digest")
_SIG_NAME = re.compile(r"(?i)META-INF/[^/]+\.(SF|RSA|EC|DSA)")


def is_signature_file(name: str) -> bool:
    return _SIG_NAME.fullmatch(name) is not None


def b64_sha256(data: bytes) -> str:
    return base64.b64encode(hashlib.sha256(data).digest()).decode("ascii")


def _hex_to_b64(hex_digest: str) -> str:
    return base64.b64encode(bytes.fromhex(hex_digest)).decode("ascii")


def verify_archive_signature(
    manifest_bytes: bytes,
    *,
    sections: list[JarSection],
    digests: dict[str, str],
    signature_files: dict[str, bytes],
    trust: TrustStore,
    now: dt.datetime,
) -> SignatureStatus:
    """``digests``: every file entry's SHA-256 (hex); ``signature_files``: their contents."""
    by_name = {s.name: s for s in sections[1:] if s.name is not None}
    if not signature_files:
        _check_manifest_digests(by_name, digests, signed=False)
        return SignatureStatus(signed=False)
    sf_names = [n for n in signature_files if n.upper().endswith(".SF")]
    blocks = [n for n in signature_files if n not in sf_names]
    if len(sf_names) != 1 or len(blocks) != 1:
        refuse(
            ErrorCode.OPA_SIGNATURE_INVALID,
            "a signed archive needs exactly one .SF file and one signature block;"
            f" found {sorted(signature_files)}",
        )
    sf_name, block_name = sf_names[0], blocks[0]
    stem, _, ext = block_name.rpartition(".")
    if stem.upper() != sf_name[:-3].upper():
        refuse(
            ErrorCode.OPA_SIGNATURE_INVALID,
            f"the signature block {block_name!r} does not belong to {sf_name!r}",
        )
    sf = signature_files[sf_name]
    # Name-less sections (opa-archive's) are tolerated: only the whole-manifest digest counts.
    sf_sections = parse_jar(sf, sf_name, ErrorCode.OPA_SIGNATURE_INVALID, named_sections=False)
    for section in sf_sections:
        for key in section.attributes:
            if _WEAK_DIGEST.match(key):
                refuse(
                    ErrorCode.OPA_SIGNATURE_WEAK,
                    f"{sf_name} uses {key}; MD5 and SHA-1 digests are refused (SHA-256 required)",
                    attribute=key,
                )
    main = sf_sections[0].attributes
    if "Signature-Version" not in main:
        refuse(ErrorCode.OPA_SIGNATURE_INVALID, f"{sf_name} has no Signature-Version")
    want = main.get("SHA-256-Digest-Manifest")
    if want is None:
        refuse(ErrorCode.OPA_SIGNATURE_INVALID, f"{sf_name} has no SHA-256-Digest-Manifest")
    if want != b64_sha256(manifest_bytes):
        refuse(
            ErrorCode.OPA_SIGNATURE_INVALID,
            "the manifest was changed after signing (SHA-256-Digest-Manifest does not match)",
        )
    for section in sf_sections[1:]:
        if section.name is not None and section.name not in by_name:
            refuse(
                ErrorCode.OPA_SIGNATURE_INVALID,
                f"{sf_name} signs a manifest section {section.name!r} the manifest lacks",
            )
    signed = verify_block(signature_files[block_name], ext.upper(), sf)
    signer = trust.verify(signed.signer, signed.carried, now)
    _check_manifest_digests(by_name, digests, signed=True)
    return SignatureStatus(
        signed=True, signer=signer, block=block_name, digest_algorithm=signed.digest_algorithm
    )


def _check_manifest_digests(
    by_name: dict[str, JarSection], digests: dict[str, str], *, signed: bool
) -> None:
    mismatch = ErrorCode.OPA_SIGNATURE_INVALID if signed else ErrorCode.OPA_MANIFEST_INVALID
    for name, section in by_name.items():
        if signed and any(_WEAK_DIGEST.match(k) for k in section.attributes):
            refuse(
                ErrorCode.OPA_SIGNATURE_WEAK,
                f"the manifest's section for {name!r} uses an MD5 or SHA-1 digest",
                name=name,
            )
        want = section.attributes.get("SHA-256-Digest")
        if want is None:
            continue
        if name not in digests:
            refuse(
                mismatch,
                f"the manifest names {name!r}, which the archive does not hold"
                + (" (removed after signing)" if signed else ""),
                name=name,
            )
        if want != _hex_to_b64(digests[name]):
            refuse(
                mismatch,
                f"the content of {name!r} does not match the manifest's SHA-256 digest",
                name=name,
            )
    if not signed:
        return
    for name in digests:
        if name == MANIFEST or is_signature_file(name):
            continue
        covering = by_name.get(name)
        if covering is None or "SHA-256-Digest" not in covering.attributes:
            refuse(
                ErrorCode.OPA_UNSIGNED_FILE,
                f"{name!r} is not covered by the signed manifest (added after signing?)",
                name=name,
            )
