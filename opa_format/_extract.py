"""Extraction into a fresh private folder, after validation, never following links.

The folder is created here (mode 0700) and must not exist before, so nothing
planted at its name is reused. Every folder below it is made with ``mkdir``
and entered with ``O_NOFOLLOW | O_DIRECTORY`` relative to its parent's
descriptor; every file is created with ``O_CREAT | O_EXCL | O_NOFOLLOW``
(0600). No link is ever created or followed. The bytes are decompressed again
under the same caps and must hash to what validation saw. On any failure the
folder and everything in it is removed.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
from pathlib import Path

from contracts import ErrorCode
from opa_format._limits import ArchiveLimits
from opa_format._model import Archive
from opa_format._paths import check_name
from opa_format._refuse import refuse
from opa_format._zip import ZipOverflowError, iter_data, read_directory

__all__ = ["extract"]

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


def extract(archive: Archive, into: Path, limits: ArchiveLimits | None = None) -> Path:
    """Extract ``archive`` into the new folder ``into`` (its parent must exist); returns it."""
    limits = limits or ArchiveLimits()
    into.mkdir(0o700)  # fails if anything (a link included) already has the name
    root = os.open(into, _DIR_FLAGS)
    try:
        _extract_all(archive, root, limits)
    except BaseException:
        os.close(root)
        shutil.rmtree(into, ignore_errors=True)
        raise
    os.close(root)
    return into


def _extract_all(archive: Archive, root: int, limits: ArchiveLimits) -> None:
    expected = {e.name: e.sha256 for e in archive.entries}
    total = 0
    for entry in read_directory(archive.data, limits):
        check_name(entry.name, limits)
        parts = entry.name.removesuffix("/").split("/")
        folders = parts if entry.is_dir else parts[:-1]
        fd = _enter(root, folders)
        try:
            if entry.is_dir:
                continue
            out = os.open(parts[-1], _FILE_FLAGS, 0o600, dir_fd=fd)
            sha = hashlib.sha256()
            cap = min(limits.max_entry_bytes, limits.max_total_bytes - total)
            with os.fdopen(out, "wb") as sink:
                try:
                    for chunk in iter_data(archive.data, entry, cap):
                        sha.update(chunk)
                        total += len(chunk)
                        sink.write(chunk)
                except ZipOverflowError:
                    refuse(
                        ErrorCode.OPA_LIMIT_EXCEEDED,
                        f"entry {entry.name!r} expands past {cap} bytes",
                        name=entry.name,
                    )
            if sha.hexdigest() != expected.get(entry.name):
                refuse(
                    ErrorCode.OPA_ZIP_CORRUPT,
                    f"entry {entry.name!r} changed between validation and extraction",
                    name=entry.name,
                )
        finally:
            if fd != root:
                os.close(fd)


def _enter(root: int, folders: list[str]) -> int:
    """A descriptor of ``root/folders…``, making each missing folder (0700), never via links."""
    fd = root
    for part in folders:
        with contextlib.suppress(FileExistsError):
            os.mkdir(part, 0o700, dir_fd=fd)
        try:
            nxt = os.open(part, _DIR_FLAGS, dir_fd=fd)
        except OSError as exc:
            refuse(
                ErrorCode.OPA_PATH_UNSAFE,
                f"cannot enter folder {part!r} during extraction: {exc.strerror}",
                name=part,
            )
        finally:
            if fd != root:
                os.close(fd)
        fd = nxt
    return fd
