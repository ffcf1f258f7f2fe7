"""The hostile-archive corpus: every archive refused with its code and its security episode.

Every archive here is built by the test itself (``_build``, ``_signing``). For
each one: ``read_archive`` refuses it with the expected ``opa_*`` code and a
4xx status; ``policies.episodes.security_episode`` built from the refusal
validates against MOVA's security-event schema; the would-be extraction
folder stays empty. A last test scans the file system for anything the corpus
could have written outside a temporary folder.
"""

from __future__ import annotations

import os
import struct
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import hashes

from contracts import ErrorCode, GatehouseError, SecurityEpisode, validate_instance
from opa_format import (
    ArchiveLimits,
    TrustStore,
    check_unsigned_allowed,
    extract,
    read_archive,
)
from policies.episodes import security_episode
from tests.security.opa._build import (
    MANIFEST_OK,
    NOW,
    Pki,
    RawEntry,
    base_files,
    files_zip,
    raw_zip,
)
from tests.security.opa._signing import b64, contents, resign, rezip, signed_archive
from tests.support.mova import vendor_errors

MARK = "gh-corpus-marker"
SMALL = ArchiveLimits(max_entry_bytes=4096, max_total_bytes=8192, max_archive_bytes=64 * 1024)


def _with(*entries: RawEntry, **files: bytes) -> bytes:
    """The base archive plus hand-made entries."""
    base = [RawEntry(n.encode(), d, method=8) for n, d in base_files(**files).items()]
    return raw_zip([*base, *entries])


def _files(**changes: bytes | None) -> bytes:
    files = base_files()
    for name, data in changes.items():
        key = name.replace("__", "/").replace("_DOT_", ".")
        if data is None:
            files.pop(key)
        else:
            files[key] = data
    return files_zip(files)


def _manifest(text: bytes) -> bytes:
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
        lambda p: _with(RawEntry(f"../{MARK}".encode(), b"x")),
        ErrorCode.OPA_PATH_UNSAFE,
    ),
    Case(
        "traversal-nested",
        lambda p: _with(RawEntry(f"data/../../{MARK}".encode(), b"x")),
        ErrorCode.OPA_PATH_UNSAFE,
    ),
    Case(
        "traversal-dot", lambda p: _with(RawEntry(b"data/./x.txt", b"x")), ErrorCode.OPA_PATH_UNSAFE
    ),
    Case(
        "absolute-path",
        lambda p: _with(RawEntry(f"/tmp/{MARK}".encode(), b"x")),
        ErrorCode.OPA_PATH_UNSAFE,
    ),
    Case(
        "drive-letter",
        lambda p: _with(RawEntry(f"C:/{MARK}".encode(), b"x")),
        ErrorCode.OPA_PATH_UNSAFE,
    ),
    Case(
        "drive-backslash",
        lambda p: _with(RawEntry(f"C:\\{MARK}".encode(), b"x")),
        ErrorCode.OPA_PATH_UNSAFE,
    ),
    Case(
        "backslash-traversal",
        lambda p: _with(RawEntry(f"..\\{MARK}".encode(), b"x")),
        ErrorCode.OPA_PATH_UNSAFE,
    ),
    Case(
        "nul-in-name", lambda p: _with(RawEntry(b"data/a\x00.txt", b"x")), ErrorCode.OPA_PATH_UNSAFE
    ),
    Case(
        "control-char",
        lambda p: _with(RawEntry(b"data/a\x1b[31m.txt", b"x")),
        ErrorCode.OPA_PATH_UNSAFE,
    ),
    Case(
        "empty-component",
        lambda p: _with(RawEntry(b"data//x.txt", b"x")),
        ErrorCode.OPA_PATH_UNSAFE,
    ),
    Case("symlink", lambda p: _with(_symlink(0o120777)), ErrorCode.OPA_PATH_UNSAFE),
    Case(
        "fifo",
        lambda p: _with(RawEntry(b"data/fifo", b"", external=0o010644 << 16)),
        ErrorCode.OPA_PATH_UNSAFE,
    ),
    Case(
        "unicode-path-field",
        lambda p: _with(
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
        lambda p: _manifest(MANIFEST_OK.replace(b"prompt.md", b"../prompt.md")),
        ErrorCode.OPA_PATH_UNSAFE,
    ),
    # --- duplicates ----------------------------------------------------------------------------
    Case(
        "duplicate-name",
        lambda p: _with(RawEntry(b"data/notes.txt", b"second")),
        ErrorCode.OPA_DUPLICATE_ENTRY,
    ),
    Case(
        "case-collision",
        lambda p: _with(RawEntry(b"data/NOTES.txt", b"second")),
        ErrorCode.OPA_DUPLICATE_ENTRY,
    ),
    Case(
        "normalisation-collision",
        lambda p: _with(
            RawEntry(unicodedata.normalize("NFC", "data/é.txt").encode(), b"1", flags=0x800),
            RawEntry(unicodedata.normalize("NFD", "data/é.txt").encode(), b"2", flags=0x800),
        ),
        ErrorCode.OPA_DUPLICATE_ENTRY,
    ),
    Case(
        "file-where-folder",
        lambda p: _with(RawEntry(b"data/notes.txt/inner", b"x")),
        ErrorCode.OPA_DUPLICATE_ENTRY,
    ),
    Case(
        "manifest-case-twin",
        lambda p: _with(RawEntry(b"meta-inf/manifest.mf", MANIFEST_OK)),
        ErrorCode.OPA_DUPLICATE_ENTRY,
    ),
    # --- limits and bombs ---------------------------------------------------------------------
    Case(
        "bomb-by-count",
        lambda p: _with(*[RawEntry(f"data/{i}".encode(), b"") for i in range(1001)]),
        ErrorCode.OPA_LIMIT_EXCEEDED,
    ),
    Case(
        "count-claimed",
        lambda p: raw_zip([RawEntry(b"a", b"")], count=65535),
        ErrorCode.OPA_LIMIT_EXCEEDED,
    ),
    Case(
        "name-too-long",
        lambda p: _with(RawEntry(b"data/" + b"n" * 300, b"x")),
        ErrorCode.OPA_LIMIT_EXCEEDED,
    ),
    Case(
        "too-deep",
        lambda p: _with(RawEntry(b"data/" + b"d/" * 20 + b"x", b"x")),
        ErrorCode.OPA_LIMIT_EXCEEDED,
    ),
    Case(
        "entry-too-big",
        lambda p: _with(RawEntry(b"data/big", os.urandom(5000))),
        ErrorCode.OPA_LIMIT_EXCEEDED,
        SMALL,
    ),
    Case(
        "total-too-big",
        lambda p: _with(*[RawEntry(f"data/{i}".encode(), os.urandom(3000)) for i in range(3)]),
        ErrorCode.OPA_LIMIT_EXCEEDED,
        SMALL,
    ),
    Case(
        "archive-too-big",
        lambda p: _with(RawEntry(b"data/pad", os.urandom(70 * 1024))),
        ErrorCode.OPA_LIMIT_EXCEEDED,
        SMALL,
    ),
    Case(
        "bomb-by-ratio",
        lambda p: _with(RawEntry(b"data/zeros", b"\0" * (4 << 20), method=8)),
        ErrorCode.OPA_ZIP_BOMB,
    ),
    Case("bomb-by-overlap", lambda p: _overlap(), ErrorCode.OPA_ZIP_BOMB),
    Case(
        "lying-size-small",  # the header says 100 bytes; the stream holds 4 MiB
        lambda p: _with(RawEntry(b"data/liar", b"\0" * (4 << 20), method=8, usize=100)),
        ErrorCode.OPA_ZIP_CORRUPT,
    ),
    Case(
        "lying-size-large",  # the header says more than the stream holds
        lambda p: _with(RawEntry(b"data/liar", b"abc" * 10, method=8, usize=5000)),
        ErrorCode.OPA_ZIP_CORRUPT,
    ),
    Case(
        "lying-local-size",  # local header and central directory disagree
        lambda p: _with(RawEntry(b"data/liar", b"abc", local_usize=999)),
        ErrorCode.OPA_ZIP_CORRUPT,
    ),
    # --- encryption and ZIP structure --------------------------------------------------------
    Case(
        "encrypted-zipcrypto",
        lambda p: _with(RawEntry(b"data/secret", b"x" * 12, flags=1)),
        ErrorCode.OPA_ENCRYPTED,
    ),
    Case(
        "encrypted-aes",
        lambda p: _with(RawEntry(b"data/secret", b"x", method=99)),
        ErrorCode.OPA_ENCRYPTED,
    ),
    Case("not-a-zip", lambda p: b"just some text, not an archive", ErrorCode.OPA_NOT_ZIP),
    Case("truncated", lambda p: _files()[:-9], ErrorCode.OPA_NOT_ZIP),
    Case("prepended-junk", lambda p: b"MZ" + b"\0" * 62 + _files(), ErrorCode.OPA_ZIP_CORRUPT),
    Case(
        "local-name-differs",
        lambda p: _with(RawEntry(b"data/a.txt", b"x", local_name=f"../{MARK}".encode()[:10])),
        ErrorCode.OPA_ZIP_CORRUPT,
    ),
    Case(
        "bad-crc",
        lambda p: _with(RawEntry(b"data/a.txt", b"hello", crc=1234)),
        ErrorCode.OPA_ZIP_CORRUPT,
    ),
    Case(
        "bzip2-method",
        lambda p: _with(RawEntry(b"data/a.bz2", b"x", method=12)),
        ErrorCode.OPA_ZIP_CORRUPT,
    ),
    # --- manifest, prompt, history ------------------------------------------------------------
    Case(
        "manifest-missing",
        lambda p: _files(**{"META-INF__MANIFEST_DOT_MF": None}),
        ErrorCode.OPA_MANIFEST_INVALID,
    ),
    Case(
        "manifest-long-line",
        lambda p: _manifest(MANIFEST_OK + b"Title2: " + b"t" * 80 + b"\r\n"),
        ErrorCode.OPA_MANIFEST_INVALID,
    ),
    Case(
        "manifest-orphan-continuation",
        lambda p: _manifest(b" continued\r\n" + MANIFEST_OK),
        ErrorCode.OPA_MANIFEST_INVALID,
    ),
    Case(
        "manifest-not-a-header",
        lambda p: _manifest(MANIFEST_OK + b"just words\r\n"),
        ErrorCode.OPA_MANIFEST_INVALID,
    ),
    Case(
        "manifest-twice-attribute",
        lambda p: _manifest(MANIFEST_OK + b"Title: again\r\n"),
        ErrorCode.OPA_MANIFEST_INVALID,
    ),
    Case(
        "manifest-no-newline",
        lambda p: _manifest(MANIFEST_OK.rstrip(b"\r\n")),
        ErrorCode.OPA_MANIFEST_INVALID,
    ),
    Case(
        "manifest-oversized",
        lambda p: _manifest(MANIFEST_OK + b"".join(b"X-%d: v\r\n" % i for i in range(9000))),
        ErrorCode.OPA_LIMIT_EXCEEDED,
    ),
    Case(
        "manifest-no-opa-version",
        lambda p: _manifest(MANIFEST_OK.replace(b"OPA-Version: 0.1\r\n", b"")),
        ErrorCode.OPA_MANIFEST_INVALID,
    ),
    Case(
        "opa-version-unknown",
        lambda p: _manifest(MANIFEST_OK.replace(b"OPA-Version: 0.1", b"OPA-Version: 9.9")),
        ErrorCode.OPA_VERSION_UNSUPPORTED,
    ),
    Case(
        "execution-mode-unknown",
        lambda p: _manifest(MANIFEST_OK + b"Execution-Mode: yolo\r\n"),
        ErrorCode.OPA_MANIFEST_INVALID,
    ),
    Case("prompt-missing", lambda p: _files(prompt_DOT_md=None), ErrorCode.OPA_PROMPT_INVALID),
    Case(
        "prompt-not-utf8",
        lambda p: _files(prompt_DOT_md=b"caf\xe9 \xff\xfe"),
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
        lambda p: _manifest(MANIFEST_OK + b"Session-File: session/other.json\r\n"),
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


def _refuse(case: Case, pki: Pki, parent: Path) -> GatehouseError:
    data = case.build(pki)
    with pytest.raises(GatehouseError) as refused:
        archive = read_archive(
            data, limits=case.limits, trust=TrustStore([pki.ca]), now=NOW, name=case.id
        )
        extract(archive, parent / "root", case.limits)  # reached only if validation failed to
    return refused.value


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_hostile_archive_is_refused_with_its_code_and_episode(
    case: Case, pki: Pki, tmp_path: Path
) -> None:
    err = _refuse(case, pki, tmp_path)
    assert err.code is case.code, (err.code, err.message)
    assert 400 <= err.code.http_status < 500
    assert err.message
    episode = security_episode(
        run_id=None,
        subject=f"opa:{case.id}",
        code=err.code,
        message=err.message,
        executor_id="shim",
        recorded_at="2026-06-01T00:00:00.000Z",
        details={"archive": case.id, **err.details},
    )
    body = episode.model_dump(mode="json")
    assert vendor_errors(body) == []
    validate_instance("ds.gatehouse_security_episode_v1", body, ErrorCode.INTERNAL_ERROR)
    assert SecurityEpisode.model_validate(body) == episode
    assert body["security_event_type"] == f"gatehouse:{case.code.value}"
    assert list(tmp_path.iterdir()) == []  # nothing extracted, nothing left


def test_the_corpus_is_large_and_covers_every_archive_code() -> None:
    assert len(CASES) >= 30
    assert len({c.id for c in CASES}) == len(CASES)
    covered = {c.code for c in CASES} | {ErrorCode.OPA_UNSIGNED_REFUSED}  # tested below
    # What is asked of a valid archive, not a defect of one: refused at ingress or by the
    # output route, tested in tests/integration/test_opa_ingress.py.
    asked = {
        ErrorCode.OPA_CONTEXT_TOO_LONG,
        ErrorCode.OPA_RECIPE_NOT_ALLOWED,
        ErrorCode.OPA_OUTPUT_UNAVAILABLE,
    }
    opa_codes = {c for c in ErrorCode if c.value.startswith("opa_")}
    assert opa_codes - asked <= covered


def test_unsigned_archive_is_refused_in_autonomous_mode(pki: Pki) -> None:
    archive = read_archive(_manifest(MANIFEST_OK + b"Execution-Mode: autonomous\r\n"), now=NOW)
    with pytest.raises(GatehouseError) as refused:
        check_unsigned_allowed(archive, allow_unsigned_autonomous=False)
    assert refused.value.code is ErrorCode.OPA_UNSIGNED_REFUSED
    check_unsigned_allowed(archive, allow_unsigned_autonomous=True)
    check_unsigned_allowed(archive, "batch", allow_unsigned_autonomous=False)
    signed = read_archive(signed_archive(pki.signer), trust=TrustStore([pki.ca]), now=NOW)
    check_unsigned_allowed(signed, "autonomous", allow_unsigned_autonomous=False)


def test_extraction_that_fails_midway_leaves_nothing(pki: Pki, tmp_path: Path) -> None:
    data = _with(
        RawEntry(b"data/a.bin", os.urandom(3000)), RawEntry(b"data/b.bin", os.urandom(3000))
    )
    archive = read_archive(data, now=NOW)
    with pytest.raises(GatehouseError) as refused:
        extract(archive, tmp_path / "root", ArchiveLimits(max_total_bytes=4000))
    assert refused.value.code is ErrorCode.OPA_LIMIT_EXCEEDED
    assert list(tmp_path.iterdir()) == []


def test_extraction_refuses_an_existing_or_linked_target(tmp_path: Path) -> None:
    archive = read_archive(_files(), now=NOW)
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "root").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(FileExistsError):
        extract(archive, tmp_path / "root")
    assert list((tmp_path / "elsewhere").iterdir()) == []


def _snapshot(root: Path) -> dict[str, tuple[int, int]]:
    out: dict[str, tuple[int, int]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in {".git", ".venv", "node_modules"}]
        for name in filenames:
            path = Path(dirpath) / name
            try:
                st = path.lstat()
            except FileNotFoundError:
                continue
            out[str(path)] = (st.st_size, st.st_mtime_ns)
    return out


def _marked(roots: list[Path]) -> list[str]:
    found = []
    for root in roots:
        for dirpath, dirnames, filenames in os.walk(root):
            depth = len(Path(dirpath).relative_to(root).parts)
            if depth >= 3:
                dirnames[:] = []
            found += [f"{dirpath}/{n}" for n in [*dirnames, *filenames] if MARK in n]
    return found


def test_file_system_scan_nothing_written_outside_a_temporary_folder(
    pki: Pki, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Run the whole corpus through read-then-extract from inside a scratch folder."""
    repo = Path(__file__).resolve().parents[3]
    work = tmp_path / "cwd"
    work.mkdir()
    monkeypatch.chdir(work)
    before = _snapshot(repo)
    for case in CASES:
        parent = tmp_path / case.id
        parent.mkdir()
        _refuse(case, pki, parent)
        assert list(parent.iterdir()) == []
    assert _snapshot(repo) == before
    assert list(work.iterdir()) == []
    roots = [tmp_path, Path("/tmp"), Path.home(), repo.parent]
    assert _marked([r for r in roots if r.is_dir()]) == []
