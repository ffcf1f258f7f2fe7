"""The ZIP structure, read by hand: end record, central directory, local headers, data.

Python's ``zipfile`` is lenient where an archive from a stranger must not be
(see docs/security.md): it lets the last of duplicate names win, reads
overlapping entries (non-recursive zip bombs), trusts header sizes and accepts
junk around the directory. This module parses the structure itself, refuses
anything ambiguous and decompresses with ``zlib`` under a byte cap, so no limit
depends on what a header claims. Only what OPA needs is read: stored and
deflated entries, one disk, no ZIP64 (the size limits are far below 4 GiB).
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import NoReturn

from contracts import ErrorCode
from opa_format._limits import ArchiveLimits
from opa_format._refuse import refuse

__all__ = ["ZipEntry", "ZipOverflowError", "iter_data", "read_directory"]

_EOCD = struct.Struct("<IHHHHIIH")  # 22 bytes
_CEN = struct.Struct("<IHHHHHHIIIHHHHHII")  # 46 bytes
_LOC = struct.Struct("<IHHHHHIIIHH")  # 30 bytes
_SIG_EOCD = 0x06054B50
_SIG_CEN = 0x02014B50
_SIG_LOC = 0x04034B50
_SIG_DESC = 0x08074B50
_SIG_ZIP64_LOCATOR = 0x07064B50
_FLAG_ENCRYPTED = 0x0001
_FLAG_DESCRIPTOR = 0x0008
_FLAG_STRONG_ENCRYPTION = 0x0040
_FLAG_UTF8 = 0x0800
_STORED = 0
_DEFLATED = 8
_AES = 99
_UNIX = 3
_S_IFMT = 0o170000
_S_IFREG = 0o100000
_S_IFDIR = 0o040000
_S_IFLNK = 0o120000
_UNICODE_PATH_EXTRA = 0x7075
_CHUNK = 64 * 1024


@dataclass(frozen=True)
class ZipEntry:
    name: str
    flags: int
    method: int
    crc: int
    compressed_size: int
    size: int  # as the central directory says; checked against the bytes while streaming
    header_offset: int
    data_offset: int
    end_offset: int  # past the data and any data descriptor
    is_dir: bool


class ZipOverflowError(Exception):
    """Decompression went past the cap the caller set; nothing past it was produced."""


def _corrupt(message: str, **details: str | int) -> NoReturn:
    refuse(ErrorCode.OPA_ZIP_CORRUPT, message, **details)


def _find_end(data: bytes) -> tuple[int, tuple[int, ...]]:
    # The end record is the last 22 bytes plus a comment of at most 64 KiB. Take the
    # candidate whose comment length reaches exactly the end of the file: no trailing junk.
    lowest = max(0, len(data) - _EOCD.size - 0xFFFF)
    pos = data.rfind(b"PK\x05\x06", lowest)
    while pos != -1:
        if pos + _EOCD.size <= len(data):
            fields = _EOCD.unpack_from(data, pos)
            if pos + _EOCD.size + fields[7] == len(data):
                return pos, fields
        pos = data.rfind(b"PK\x05\x06", lowest, pos)
    refuse(ErrorCode.OPA_NOT_ZIP, "not a ZIP archive: no end of central directory record")


def _decode_name(raw: bytes, flags: int, extra: bytes) -> str:
    if flags & _FLAG_UTF8:
        try:
            name = raw.decode("utf-8")
        except UnicodeDecodeError:
            refuse(ErrorCode.OPA_PATH_UNSAFE, "an entry name is not valid UTF-8", name=repr(raw))
    else:
        name = raw.decode("ascii") if raw.isascii() else raw.decode("cp437")
    # Info-ZIP's Unicode Path field makes unzip use another name than the header's:
    # the entry would mean one thing to us and another to standard tools.
    for tag, body in _extra_fields(extra):
        if tag == _UNICODE_PATH_EXTRA:
            alt = body[5:].decode("utf-8", "replace")
            if alt != name:
                refuse(
                    ErrorCode.OPA_PATH_UNSAFE,
                    "an entry carries a second, different name (Unicode Path field)",
                    name=name,
                    other=alt,
                )
    return name


def _extra_fields(extra: bytes) -> Iterator[tuple[int, bytes]]:
    at = 0
    while at < len(extra):
        if at + 4 > len(extra):
            _corrupt("an extra field is truncated")
        tag, size = struct.unpack_from("<HH", extra, at)
        if at + 4 + size > len(extra):
            _corrupt("an extra field runs past its header")
        yield tag, extra[at + 4 : at + 4 + size]
        at += 4 + size


def read_directory(data: bytes, limits: ArchiveLimits) -> list[ZipEntry]:
    """Every entry of the central directory, each checked against its local header."""
    end, (sig, disk, cd_disk, n_here, n_total, cd_size, cd_offset, _) = _find_end(data)
    del sig
    if end >= 20 and struct.unpack_from("<I", data, end - 20)[0] == _SIG_ZIP64_LOCATOR:
        _corrupt("ZIP64 archives are not read (OPA archives stay far below 4 GiB)")
    if disk != 0 or cd_disk != 0 or n_here != n_total:
        _corrupt("multi-disk (split) archives are not read")
    if n_total > limits.max_entries:
        refuse(
            ErrorCode.OPA_LIMIT_EXCEEDED,
            f"the archive has {n_total} entries; at most {limits.max_entries} are allowed",
            limit="max_entries",
            value=n_total,
        )
    if cd_offset + cd_size != end:
        _corrupt(
            "the central directory does not end where the end record begins",
            cd_offset=cd_offset,
            cd_size=cd_size,
            end=end,
        )
    entries: list[ZipEntry] = []
    at = cd_offset
    for _ in range(n_total):
        if at + _CEN.size > end:
            _corrupt("the central directory is truncated")
        (
            sig,
            made_by,
            _needed,
            flags,
            method,
            _time,
            _date,
            crc,
            csize,
            usize,
            n_len,
            e_len,
            c_len,
            disk_start,
            _internal,
            external,
            offset,
        ) = _CEN.unpack_from(data, at)
        if sig != _SIG_CEN:
            _corrupt("a central directory record has a bad signature", offset=at)
        raw = data[at + _CEN.size : at + _CEN.size + n_len]
        extra = data[at + _CEN.size + n_len : at + _CEN.size + n_len + e_len]
        at += _CEN.size + n_len + e_len + c_len
        if at > end:
            _corrupt("a central directory record runs past the directory")
        if disk_start != 0:
            _corrupt("an entry starts on another disk")
        name = _decode_name(raw, flags, extra)
        if flags & (_FLAG_ENCRYPTED | _FLAG_STRONG_ENCRYPTION) or method == _AES:
            refuse(ErrorCode.OPA_ENCRYPTED, f"entry {name!r} is encrypted", name=name)
        if method not in (_STORED, _DEFLATED):
            _corrupt(
                f"entry {name!r} uses compression method {method}; only stored and deflated"
                " are read",
                name=name,
                method=method,
            )
        if method == _STORED and csize != usize:
            _corrupt(f"stored entry {name!r} has differing sizes", name=name)
        is_dir = name.endswith("/")
        if made_by >> 8 == _UNIX:
            kind = (external >> 16) & _S_IFMT
            if kind == _S_IFLNK:
                refuse(ErrorCode.OPA_PATH_UNSAFE, f"entry {name!r} is a symbolic link", name=name)
            if kind not in (0, _S_IFREG, _S_IFDIR) or ((kind == _S_IFDIR) != is_dir and kind):
                refuse(
                    ErrorCode.OPA_PATH_UNSAFE,
                    f"entry {name!r} is not a plain file or folder",
                    name=name,
                    mode=oct(external >> 16),
                )
        if is_dir and usize != 0:
            _corrupt(f"folder entry {name!r} has content", name=name)
        entries.append(
            _check_local(
                data,
                name,
                raw=raw,
                flags=flags,
                method=method,
                crc=crc,
                csize=csize,
                usize=usize,
                offset=offset,
            )
        )
    if at != end:
        _corrupt("the central directory holds more than its records")
    _check_no_overlap(entries, cd_offset)
    return entries


def _check_local(
    data: bytes,
    name: str,
    *,
    raw: bytes,
    flags: int,
    method: int,
    crc: int,
    csize: int,
    usize: int,
    offset: int,
) -> ZipEntry:
    if offset + _LOC.size > len(data):
        _corrupt(f"entry {name!r} points past the archive", name=name)
    sig, _ver, l_flags, l_method, _t, _d, l_crc, l_csize, l_usize, n_len, e_len = _LOC.unpack_from(
        data, offset
    )
    if sig != _SIG_LOC:
        _corrupt(f"entry {name!r} has no local header where the directory says", name=name)
    l_raw = data[offset + _LOC.size : offset + _LOC.size + n_len]
    if l_raw != raw or l_flags != flags or l_method != method:
        _corrupt(
            f"the local header of entry {name!r} disagrees with the central directory",
            name=name,
        )
    descriptor = bool(flags & _FLAG_DESCRIPTOR)
    if not descriptor and (l_crc, l_csize, l_usize) != (crc, csize, usize):
        _corrupt(f"the local header of entry {name!r} gives other sizes or CRC", name=name)
    if descriptor and (l_crc, l_csize, l_usize) not in ((0, 0, 0), (crc, csize, usize)):
        _corrupt(f"the local header of entry {name!r} gives other sizes or CRC", name=name)
    start = offset + _LOC.size + n_len + e_len
    stop = start + csize
    if stop > len(data):
        _corrupt(f"the data of entry {name!r} runs past the archive", name=name)
    if descriptor:
        has_sig = stop + 4 <= len(data) and struct.unpack_from("<I", data, stop)[0] == _SIG_DESC
        body = stop + 4 if has_sig else stop
        if body + 12 > len(data):
            _corrupt(f"the data descriptor of entry {name!r} is truncated", name=name)
        if struct.unpack_from("<III", data, body) != (crc, csize, usize):
            _corrupt(f"the data descriptor of entry {name!r} disagrees", name=name)
        stop = body + 12
    return ZipEntry(
        name=name,
        flags=flags,
        method=method,
        crc=crc,
        compressed_size=csize,
        size=usize,
        header_offset=offset,
        data_offset=start,
        end_offset=stop,
        is_dir=name.endswith("/"),
    )


def _check_no_overlap(entries: list[ZipEntry], cd_offset: int) -> None:
    # Entries that share bytes are how non-recursive zip bombs multiply one block of
    # compressed data (and how one entry can hide inside another).
    previous: ZipEntry | None = None
    for entry in sorted(entries, key=lambda e: e.header_offset):
        if previous is not None and entry.header_offset < previous.end_offset:
            refuse(
                ErrorCode.OPA_ZIP_BOMB,
                f"entries {previous.name!r} and {entry.name!r} overlap in the archive",
                first=previous.name,
                second=entry.name,
            )
        if entry.end_offset > cd_offset:
            refuse(
                ErrorCode.OPA_ZIP_BOMB,
                f"entry {entry.name!r} overlaps the central directory",
                name=entry.name,
            )
        previous = entry


def iter_data(data: bytes, entry: ZipEntry, cap: int) -> Iterator[bytes]:
    """The entry's bytes, decompressed in chunks; ``ZipOverflowError`` past ``cap`` bytes.

    At the end the byte count must equal the directory's size and the CRC must
    match: a header that lies about either is refused here.
    """
    cap = min(cap, entry.size)  # more bytes than the directory says is a lie: stop there
    compressed = data[entry.data_offset : entry.data_offset + entry.compressed_size]
    produced = 0
    crc = 0
    if entry.method == _STORED:
        for at in range(0, len(compressed), _CHUNK):
            chunk = compressed[at : at + _CHUNK]
            produced += len(chunk)
            crc = zlib.crc32(chunk, crc)
            yield chunk
    else:
        inflater = zlib.decompressobj(-15)
        for at in range(0, len(compressed), _CHUNK):
            pending = compressed[at : at + _CHUNK]
            while pending:
                try:
                    chunk = inflater.decompress(pending, _CHUNK)
                except zlib.error as exc:
                    _corrupt(f"entry {entry.name!r} is not valid deflate data: {exc}")
                pending = inflater.unconsumed_tail
                produced += len(chunk)
                if produced > cap:
                    _overflow(entry, produced)
                crc = zlib.crc32(chunk, crc)
                yield chunk
        if not inflater.eof or inflater.unused_data:
            _corrupt(f"the deflate stream of entry {entry.name!r} is truncated or padded")
    if produced > cap:
        _overflow(entry, produced)
    if produced != entry.size:
        _corrupt(
            f"entry {entry.name!r} holds {produced} bytes, its header says {entry.size}",
            name=entry.name,
        )
    if crc != entry.crc:
        _corrupt(f"entry {entry.name!r} fails its CRC check", name=entry.name)


def _overflow(entry: ZipEntry, produced: int) -> NoReturn:
    if produced > entry.size:
        _corrupt(
            f"entry {entry.name!r} holds more bytes than its header says ({entry.size})",
            name=entry.name,
        )
    raise ZipOverflowError(entry.name)
