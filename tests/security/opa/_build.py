"""Builders for the hostile-archive corpus: ZIPs written byte by byte, certificates, signing.

Python's zipfile cannot write most of what the corpus needs (NUL in names, lying
sizes, overlapping entries, local headers that disagree with the directory), so
``raw_zip`` writes the structure by hand from ``RawEntry`` records whose every
field can be set.
"""

from __future__ import annotations

import datetime as dt
import struct
import zlib
from dataclasses import dataclass, field

from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import NameOID

from opa_format import SigningKey

MANIFEST_OK = (
    b"Manifest-Version: 1.0\r\nOPA-Version: 0.1\r\nPrompt-File: prompt.md\r\nTitle: corpus\r\n"
)
PROMPT_OK = b"Summarise data/notes.txt for {{agent}} from {{archive_name}}.\n"
HISTORY_OK = (
    b'{"opa_version": "0.1", "session_id": "s1", "messages": ['
    b'{"role": "system", "content": "Be brief."},'
    b'{"role": "user", "content": [{"type": "text", "text": "hello"}]},'
    b'{"role": "assistant", "content": "hi"}]}'
)
UNIX_FILE = 0o100644 << 16
MADE_BY_UNIX = (3 << 8) | 20


@dataclass
class RawEntry:
    name: bytes
    data: bytes = b""
    method: int = 0  # 0 stored, 8 deflated
    flags: int = 0
    made_by: int = MADE_BY_UNIX
    external: int = UNIX_FILE
    crc: int | None = None
    csize: int | None = None  # as written in the headers (default: true)
    usize: int | None = None
    local_name: bytes | None = None
    local_flags: int | None = None
    local_usize: int | None = None
    extra: bytes = b""
    offset: int | None = None  # central directory's offset (default: where it was written)
    payload: bytes | None = field(default=None, repr=False)  # compressed bytes, if given


def deflate(data: bytes) -> bytes:
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    return c.compress(data) + c.flush()


def raw_zip(
    entries: list[RawEntry],
    *,
    prefix: bytes = b"",
    comment: bytes = b"",
    trailer: bytes = b"",
    count: int | None = None,
    write_locals: bool = True,
) -> bytes:
    out = bytearray(prefix)
    central = bytearray()
    for e in entries:
        payload = e.payload
        if payload is None:
            payload = deflate(e.data) if e.method == 8 else e.data
        crc = zlib.crc32(e.data) if e.crc is None else e.crc
        csize = len(payload) if e.csize is None else e.csize
        usize = len(e.data) if e.usize is None else e.usize
        here = len(out)
        if write_locals:
            lname = e.name if e.local_name is None else e.local_name
            lflags = e.flags if e.local_flags is None else e.local_flags
            lusize = usize if e.local_usize is None else e.local_usize
            out += struct.pack(
                "<IHHHHHIIIHH",
                0x04034B50,
                20,
                lflags,
                e.method,
                0,
                0x21,
                crc,
                csize,
                lusize,
                len(lname),
                len(e.extra),
            )
            out += lname + e.extra + payload
        offset = here if e.offset is None else e.offset
        central += struct.pack(
            "<IHHHHHHIIIHHHHHII",
            0x02014B50,
            e.made_by,
            20,
            e.flags,
            e.method,
            0,
            0x21,
            crc,
            csize,
            usize,
            len(e.name),
            len(e.extra),
            0,
            0,
            0,
            e.external,
            offset,
        )
        central += e.name + e.extra
    cd_offset = len(out)
    out += central
    n = len(entries) if count is None else count
    out += struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, n, n, len(central), cd_offset, len(comment))
    return bytes(out + comment + trailer)


def files_zip(files: dict[str, bytes], **kw: object) -> bytes:
    """A well-formed archive of ``files`` (deflated), written by hand."""
    return raw_zip([RawEntry(n.encode(), d, method=8) for n, d in files.items()])


def base_files(**extra: bytes) -> dict[str, bytes]:
    files = {
        "META-INF/MANIFEST.MF": MANIFEST_OK,
        "prompt.md": PROMPT_OK,
        "session/history.json": HISTORY_OK,
        "data/notes.txt": b"three notes\n",
    }
    files.update(extra)
    return files


# --- certificates -----------------------------------------------------------------------------

# Certificates are made around today, so the CLI (which checks against the clock) agrees.
NOW = dt.datetime.now(dt.UTC).replace(hour=0, minute=0, second=0, microsecond=0)


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def make_cert(
    cn: str,
    key: rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey,
    *,
    issuer: tuple[x509.Certificate, rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey] | None = None,
    ca: bool = False,
    not_before: dt.datetime = NOW - dt.timedelta(days=30),
    not_after: dt.datetime = NOW + dt.timedelta(days=365),
    hash_algorithm: hashes.SHA256 | hashes.SHA384 | None = None,
) -> x509.Certificate:
    issuer_name = issuer[0].subject if issuer else _name(cn)
    signing_key = issuer[1] if issuer else key
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(cn))
        .issuer_name(issuer_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before)
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    return builder.sign(signing_key, hash_algorithm or hashes.SHA256())


@dataclass(frozen=True)
class Pki:
    ca: x509.Certificate
    ca_key: rsa.RSAPrivateKey
    signer: SigningKey  # issued by the CA
    stranger: SigningKey  # self-signed, never trusted
    expired: SigningKey  # issued by the CA, expired before NOW
    ec_signer: SigningKey  # EC key issued by the CA


def make_pki() -> Pki:
    ca_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    ca = make_cert("Gatehouse Test CA", ca_key, ca=True)
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    signer = SigningKey(key, make_cert("archive signer", key, issuer=(ca, ca_key)))
    skey = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    stranger = SigningKey(skey, make_cert("stranger", skey))
    ekey = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    expired = SigningKey(
        ekey,
        make_cert(
            "expired signer",
            ekey,
            issuer=(ca, ca_key),
            not_before=NOW - dt.timedelta(days=400),
            not_after=NOW - dt.timedelta(days=1),
        ),
    )
    eck = ec.generate_private_key(ec.SECP256R1())
    ec_signer = SigningKey(eck, make_cert("ec signer", eck, issuer=(ca, ca_key)))
    return Pki(ca, ca_key, signer, stranger, expired, ec_signer)
