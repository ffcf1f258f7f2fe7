"""The hostile-archive corpus: each case builds one archive and names the code
``read_archive`` (or ``extract``) must refuse it with. Built from nothing but
``_build`` and ``_signing``; ``test_corpus`` runs it.
"""

from __future__ import annotations

import os
import struct
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass

from cryptography.hazmat.primitives import hashes

from contracts import ErrorCode
from opa_format import ArchiveLimits
from tests.security.opa._build import (
    MANIFEST_OK,
    Pki,
    RawEntry,
    base_files,
    files_zip,
    raw_zip,
)
from tests.security.opa._signing import b64, contents, resign, rezip, signed_archive

__all__ = ["CASES", "MARK", "Case", "with_entries", "with_files", "with_manifest"]

MARK = "gh-corpus-marker"
SMALL = ArchiveLimits(max_entry_bytes=4096, max_total_bytes=8192, max_archive_bytes=64 * 1024)


def with_entries(*entries: RawEntry, **files: bytes) -> bytes:
    """The base archive plus hand-made entries."""
    base = [RawEntry(n.encode(), d, method=8) for n, d in base_files(**files).items()]
    return raw_zip([*base, *entries])


def with_files(**changes: bytes | None) -> bytes:
    files = base_files()
    for name, data in changes.items():
        key = name.replace("__", "/").replace("_DOT_", ".")
        if data is None:
            files.pop(key)
        else:
            files[key] = data
    return files_zip(files)


def with_manifest(text: bytes) -> bytes:
    files = base_files()
    files["META-INF/MANIFEST.MF"] = text
    return files_zip(files)


def _history(text: bytes) -> bytes:
    return files_zip(base_files(**{"session/history.json": text}))


def _overlap() -> bytes:
    # Entry B's local header and data sit inside entry A's stored data: a bomb's shape.
    inner_data = b"x" * 100
    inner_name = b"data/b.txt"
    import zlib

    inner = (
        struct.pack(
            "<IHHHHHIIIHH",
            0x04034B50,
            20,
            0,
            0,
            0,
            0x21,
            zlib.crc32(inner_data),
            100,
            100,
            len(inner_name),
            0,
        )
        + inner_name
        + inner_data
    )
    base = [RawEntry(n.encode(), d, method=8) for n, d in base_files().items()]
    a = RawEntry(b"data/a.bin", inner)
    probe = raw_zip([*base, a])
    a_offset = probe.find(b"PK\x03\x04" + struct.pack("<H", 20), probe.find(b"data/a.bin") - 30)
    a_data = a_offset + 30 + len(b"data/a.bin")
    b = RawEntry(inner_name, inner_data, offset=a_data)
    return _overlap_fix(base, a, b, a_data)


def _overlap_fix(base: list[RawEntry], a: RawEntry, b: RawEntry, b_offset: int) -> bytes:
    # raw_zip writes every entry's local header; B's must not be written a second time,
    # so its central record alone is appended by hand after the others.
    whole = raw_zip([*base, a])
    eocd = whole.rfind(b"PK\x05\x06")
    n, cd_size, cd_offset = (
        struct.unpack_from("<H", whole, eocd + 10)[0],
        *struct.unpack_from("<II", whole, eocd + 12),
    )
    import zlib

    record = (
        struct.pack(
            "<IHHHHHHIIIHHHHHII",
            0x02014B50,
            (3 << 8) | 20,
            20,
            0,
            0,
            0,
            0x21,
            zlib.crc32(b.data),
            100,
            100,
            len(b.name),
            0,
            0,
            0,
            0,
            0o100644 << 16,
            b_offset,
        )
        + b.name
    )
    central = whole[cd_offset : cd_offset + cd_size] + record
    return (
        whole[:cd_offset]
        + central
        + struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, n + 1, n + 1, len(central), cd_offset, 0)
    )


@dataclass(frozen=True)
class Case:
    id: str
    build: Callable[[Pki], bytes]
    code: ErrorCode
    limits: ArchiveLimits | None = None


def _symlink(mode: int) -> RawEntry:
    return RawEntry(b"data/link", b"/etc/passwd", external=mode << 16)


CASES = [
    # --- path safety -------------------------------------------------------------------------
    Case(
        "traversal-dotdot",
        lambda p: with_entries(RawEntry(f"../{MARK}".encode(), b"x")),
        ErrorCode.OPA_PATH_UNSAFE,
    ),
    Case(
        "traversal-nested",
        lambda p: with_entries(RawEntry(f"data/../../{MARK}".encode(), b"x")),
        ErrorCode.OPA_PATH_UNSAFE,
    ),
    Case(
        "traversal-dot",
        lambda p: with_entries(RawEntry(b"data/./x.txt", b"x")),
        ErrorCode.OPA_PATH_UNSAFE,
    ),
    Case(
        "absolute-path",
        lambda p: with_entries(RawEntry(f"/tmp/{MARK}".encode(), b"x")),
        ErrorCode.OPA_PATH_UNSAFE,
    ),
    Case(
        "drive-letter",
        lambda p: with_entries(RawEntry(f"C:/{MARK}".encode(), b"x")),
        ErrorCode.OPA_PATH_UNSAFE,
    ),
    Case(
        "drive-backslash",
        lambda p: with_entries(RawEntry(f"C:\\{MARK}".encode(), b"x")),
        ErrorCode.OPA_PATH_UNSAFE,
    ),
    Case(
        "backslash-traversal",
        lambda p: with_entries(RawEntry(f"..\\{MARK}".encode(), b"x")),
        ErrorCode.OPA_PATH_UNSAFE,
    ),
    Case(
        "nul-in-name",
        lambda p: with_entries(RawEntry(b"data/a\x00.txt", b"x")),
        ErrorCode.OPA_PATH_UNSAFE,
    ),
    Case(
        "control-char",
        lambda p: with_entries(RawEntry(b"data/a\x1b[31m.txt", b"x")),
        ErrorCode.OPA_PATH_UNSAFE,
    ),
    Case(
        "empty-component",
        lambda p: with_entries(RawEntry(b"data//x.txt", b"x")),
        ErrorCode.OPA_PATH_UNSAFE,
    ),
    Case("symlink", lambda p: with_entries(_symlink(0o120777)), ErrorCode.OPA_PATH_UNSAFE),
    Case(
        "fifo",
        lambda p: with_entries(RawEntry(b"data/fifo", b"", external=0o010644 << 16)),
        ErrorCode.OPA_PATH_UNSAFE,
    ),
    Case(
        "unicode-path-field",
        lambda p: with_entries(
            RawEntry(
                b"data/ok.txt",
                b"x",
                extra=struct.pack("<HHB", 0x7075, 5 + len(MARK) + 3, 1)
                + b"\0\0\0\0"
                + f"../{MARK}".encode(),
            )
        ),
        ErrorCode.OPA_PATH_UNSAFE,
    ),
    Case(
        "prompt-file-traversal",
        lambda p: with_manifest(MANIFEST_OK.replace(b"prompt.md", b"../prompt.md")),
        ErrorCode.OPA_PATH_UNSAFE,
    ),
    # --- duplicates ----------------------------------------------------------------------------
    Case(
        "duplicate-name",
        lambda p: with_entries(RawEntry(b"data/notes.txt", b"second")),
        ErrorCode.OPA_DUPLICATE_ENTRY,
    ),
    Case(
        "case-collision",
        lambda p: with_entries(RawEntry(b"data/NOTES.txt", b"second")),
        ErrorCode.OPA_DUPLICATE_ENTRY,
    ),
    Case(
        "normalisation-collision",
        lambda p: with_entries(
            RawEntry(unicodedata.normalize("NFC", "data/é.txt").encode(), b"1", flags=0x800),
            RawEntry(unicodedata.normalize("NFD", "data/é.txt").encode(), b"2", flags=0x800),
        ),
        ErrorCode.OPA_DUPLICATE_ENTRY,
    ),
    Case(
        "file-where-folder",
        lambda p: with_entries(RawEntry(b"data/notes.txt/inner", b"x")),
        ErrorCode.OPA_DUPLICATE_ENTRY,
    ),
    Case(
        "manifest-case-twin",
        lambda p: with_entries(RawEntry(b"meta-inf/manifest.mf", MANIFEST_OK)),
        ErrorCode.OPA_DUPLICATE_ENTRY,
    ),
    # --- limits and bombs ---------------------------------------------------------------------
    Case(
        "bomb-by-count",
        lambda p: with_entries(*[RawEntry(f"data/{i}".encode(), b"") for i in range(1001)]),
        ErrorCode.OPA_LIMIT_EXCEEDED,
    ),
    Case(
        "count-claimed",
        lambda p: raw_zip([RawEntry(b"a", b"")], count=65535),
        ErrorCode.OPA_LIMIT_EXCEEDED,
    ),
    Case(
        "name-too-long",
        lambda p: with_entries(RawEntry(b"data/" + b"n" * 300, b"x")),
        ErrorCode.OPA_LIMIT_EXCEEDED,
    ),
    Case(
        "too-deep",
        lambda p: with_entries(RawEntry(b"data/" + b"d/" * 20 + b"x", b"x")),
        ErrorCode.OPA_LIMIT_EXCEEDED,
    ),
    Case(
        "entry-too-big",
        lambda p: with_entries(RawEntry(b"data/big", os.urandom(5000))),
        ErrorCode.OPA_LIMIT_EXCEEDED,
        SMALL,
    ),
    Case(
        "total-too-big",
        lambda p: with_entries(
            *[RawEntry(f"data/{i}".encode(), os.urandom(3000)) for i in range(3)]
        ),
        ErrorCode.OPA_LIMIT_EXCEEDED,
        SMALL,
    ),
    Case(
        "archive-too-big",
        lambda p: with_entries(RawEntry(b"data/pad", os.urandom(70 * 1024))),
        ErrorCode.OPA_LIMIT_EXCEEDED,
        SMALL,
    ),
    Case(
        "bomb-by-ratio",
        lambda p: with_entries(RawEntry(b"data/zeros", b"\0" * (4 << 20), method=8)),
        ErrorCode.OPA_ZIP_BOMB,
    ),
    Case("bomb-by-overlap", lambda p: _overlap(), ErrorCode.OPA_ZIP_BOMB),
    Case(
        "lying-size-small",  # the header says 100 bytes; the stream holds 4 MiB
        lambda p: with_entries(RawEntry(b"data/liar", b"\0" * (4 << 20), method=8, usize=100)),
        ErrorCode.OPA_ZIP_CORRUPT,
    ),
    Case(
        "lying-size-large",  # the header says more than the stream holds
        lambda p: with_entries(RawEntry(b"data/liar", b"abc" * 10, method=8, usize=5000)),
        ErrorCode.OPA_ZIP_CORRUPT,
    ),
    Case(
        "lying-local-size",  # local header and central directory disagree
        lambda p: with_entries(RawEntry(b"data/liar", b"abc", local_usize=999)),
        ErrorCode.OPA_ZIP_CORRUPT,
    ),
    # --- encryption and ZIP structure --------------------------------------------------------
    Case(
        "encrypted-zipcrypto",
        lambda p: with_entries(RawEntry(b"data/secret", b"x" * 12, flags=1)),
        ErrorCode.OPA_ENCRYPTED,
    ),
    Case(
        "encrypted-aes",
        lambda p: with_entries(RawEntry(b"data/secret", b"x", method=99)),
        ErrorCode.OPA_ENCRYPTED,
    ),
    Case("not-a-zip", lambda p: b"just some text, not an archive", ErrorCode.OPA_NOT_ZIP),
    Case("truncated", lambda p: with_files()[:-9], ErrorCode.OPA_NOT_ZIP),
    Case("prepended-junk", lambda p: b"MZ" + b"\0" * 62 + with_files(), ErrorCode.OPA_ZIP_CORRUPT),
    Case(
        "local-name-differs",
        lambda p: with_entries(
            RawEntry(b"data/a.txt", b"x", local_name=f"../{MARK}".encode()[:10])
        ),
        ErrorCode.OPA_ZIP_CORRUPT,
    ),
    Case(
        "bad-crc",
        lambda p: with_entries(RawEntry(b"data/a.txt", b"hello", crc=1234)),
        ErrorCode.OPA_ZIP_CORRUPT,
    ),
    Case(
        "bzip2-method",
        lambda p: with_entries(RawEntry(b"data/a.bz2", b"x", method=12)),
        ErrorCode.OPA_ZIP_CORRUPT,
    ),
    # --- manifest, prompt, history ------------------------------------------------------------
    Case(
        "manifest-missing",
        lambda p: with_files(**{"META-INF__MANIFEST_DOT_MF": None}),
        ErrorCode.OPA_MANIFEST_INVALID,
    ),
    Case(
        "manifest-long-line",
        lambda p: with_manifest(MANIFEST_OK + b"Title2: " + b"t" * 80 + b"\r\n"),
        ErrorCode.OPA_MANIFEST_INVALID,
    ),
    Case(
        "manifest-orphan-continuation",
        lambda p: with_manifest(b" continued\r\n" + MANIFEST_OK),
        ErrorCode.OPA_MANIFEST_INVALID,
    ),
    Case(
        "manifest-not-a-header",
        lambda p: with_manifest(MANIFEST_OK + b"just words\r\n"),
        ErrorCode.OPA_MANIFEST_INVALID,
    ),
    Case(
        "manifest-twice-attribute",
        lambda p: with_manifest(MANIFEST_OK + b"Title: again\r\n"),
        ErrorCode.OPA_MANIFEST_INVALID,
    ),
    Case(
        "manifest-no-newline",
        lambda p: with_manifest(MANIFEST_OK.rstrip(b"\r\n")),
        ErrorCode.OPA_MANIFEST_INVALID,
    ),
    Case(
        "manifest-oversized",
        lambda p: with_manifest(MANIFEST_OK + b"".join(b"X-%d: v\r\n" % i for i in range(9000))),
        ErrorCode.OPA_LIMIT_EXCEEDED,
    ),
    Case(
        "manifest-no-opa-version",
        lambda p: with_manifest(MANIFEST_OK.replace(b"OPA-Version: 0.1\r\n", b"")),
        ErrorCode.OPA_MANIFEST_INVALID,
    ),
    Case(
        "opa-version-unknown",
        lambda p: with_manifest(MANIFEST_OK.replace(b"OPA-Version: 0.1", b"OPA-Version: 9.9")),
        ErrorCode.OPA_VERSION_UNSUPPORTED,
    ),
    Case(
        "execution-mode-unknown",
        lambda p: with_manifest(MANIFEST_OK + b"Execution-Mode: yolo\r\n"),
        ErrorCode.OPA_MANIFEST_INVALID,
    ),
    Case("prompt-missing", lambda p: with_files(prompt_DOT_md=None), ErrorCode.OPA_PROMPT_INVALID),
    Case(
        "prompt-not-utf8",
        lambda p: with_files(prompt_DOT_md=b"caf\xe9 \xff\xfe"),
        ErrorCode.OPA_PROMPT_INVALID,
    ),
    Case("history-not-json", lambda p: _history(b"{not json"), ErrorCode.OPA_HISTORY_INVALID),
    Case(
        "history-bad-role",
        lambda p: _history(b'{"messages": [{"role": "root", "content": "x"}]}'),
        ErrorCode.OPA_HISTORY_INVALID,
    ),
    Case(
        "history-nan",
        lambda p: _history(b'{"messages": [], "x": NaN}'),
        ErrorCode.OPA_HISTORY_INVALID,
    ),
    Case(
        "history-named-missing",
        lambda p: with_manifest(MANIFEST_OK + b"Session-File: session/other.json\r\n"),
        ErrorCode.OPA_HISTORY_INVALID,
    ),
    # --- signatures --------------------------------------------------------------------------
    Case(
        "signature-sha1-block",
        lambda p: resign(contents(signed_archive(p.signer)), p.signer, digest=hashes.SHA1()),
        ErrorCode.OPA_SIGNATURE_WEAK,
    ),
    Case(
        "signature-sha1-sf",
        lambda p: resign(
            c := contents(signed_archive(p.signer)),
            p.signer,
            sf=b"Signature-Version: 1.0\r\nSHA1-Digest-Manifest: "
            + b64(c["META-INF/MANIFEST.MF"], "sha1").encode()
            + b"\r\n",
        ),
        ErrorCode.OPA_SIGNATURE_WEAK,
    ),
    Case(
        "signature-md5-manifest",
        lambda p: resign(
            {
                **(c := contents(signed_archive(p.signer))),
                "META-INF/MANIFEST.MF": c["META-INF/MANIFEST.MF"].replace(
                    b"Name: data/notes.txt\r\n", b"Name: data/notes.txt\r\nMD5-Digest: AAAA\r\n"
                ),
            },
            p.signer,
        ),
        ErrorCode.OPA_SIGNATURE_WEAK,
    ),
    Case(
        "file-added-after-signing",
        lambda p: rezip({**contents(signed_archive(p.signer)), "data/added.txt": b"new"}),
        ErrorCode.OPA_UNSIGNED_FILE,
    ),
    Case(
        "file-changed-after-signing",
        lambda p: rezip({**contents(signed_archive(p.signer)), "data/notes.txt": b"changed"}),
        ErrorCode.OPA_SIGNATURE_INVALID,
    ),
    Case(
        "file-removed-after-signing",
        lambda p: rezip(
            {k: v for k, v in contents(signed_archive(p.signer)).items() if k != "data/notes.txt"}
        ),
        ErrorCode.OPA_SIGNATURE_INVALID,
    ),
    Case(
        "manifest-changed-after-signing",
        lambda p: rezip(
            {
                **(c := contents(signed_archive(p.signer))),
                "META-INF/MANIFEST.MF": c["META-INF/MANIFEST.MF"].replace(
                    b"Execution-Mode: interactive", b"Execution-Mode: autonomous"
                ),
            }
        ),
        ErrorCode.OPA_SIGNATURE_INVALID,
    ),
    Case(
        "block-from-another-archive",
        lambda p: rezip(
            {
                **contents(signed_archive(p.signer)),
                "META-INF/SIGNATURE.RSA": contents(signed_archive(p.signer, extra=b"1"))[
                    "META-INF/SIGNATURE.RSA"
                ],
            }
        ),
        ErrorCode.OPA_SIGNATURE_INVALID,
    ),
    Case(
        "block-garbage",
        lambda p: rezip(
            {**contents(signed_archive(p.signer)), "META-INF/SIGNATURE.RSA": b"\x30\x03junk"}
        ),
        ErrorCode.OPA_SIGNATURE_INVALID,
    ),
    Case(
        "block-without-sf",
        lambda p: rezip(
            {k: v for k, v in contents(signed_archive(p.signer)).items() if not k.endswith(".SF")}
        ),
        ErrorCode.OPA_SIGNATURE_INVALID,
    ),
    Case(
        "block-kind-mismatch",  # an RSA signature in a .EC block
        lambda p: resign(
            contents(signed_archive(p.signer)), p.signer, block_name="META-INF/SIGNATURE.EC"
        ),
        ErrorCode.OPA_SIGNATURE_INVALID,
    ),
    Case("signer-untrusted", lambda p: signed_archive(p.stranger), ErrorCode.OPA_SIGNER_UNTRUSTED),
    Case("signer-expired", lambda p: signed_archive(p.expired), ErrorCode.OPA_SIGNER_UNTRUSTED),
]
