"""Path safety for entry names: reject, never sanitise (the whole archive is refused).

A name must be a relative POSIX path of plain components: no ``..`` or ``.``,
no leading ``/``, no backslash, no drive letter or colon, no NUL or control
character, no empty component. Two names that a case-insensitive or
Unicode-normalising file system would treat as one are duplicates, and so is a
file sitting where another entry needs a folder.
"""

from __future__ import annotations

import unicodedata
from typing import NoReturn

from contracts import ErrorCode
from opa_format._limits import ArchiveLimits
from opa_format._refuse import refuse

__all__ = ["check_name", "check_unique", "collision_key"]


def _is_control(ch: str) -> bool:
    return unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp")


def check_name(name: str, limits: ArchiveLimits) -> None:
    """Refuse an unsafe entry name (``opa_path_unsafe``) or one past the limits."""

    def unsafe(why: str) -> NoReturn:
        refuse(ErrorCode.OPA_PATH_UNSAFE, f"unsafe entry name {name!r}: {why}", name=name)

    if not name or name == "/":
        unsafe("empty")
    if any(_is_control(ch) for ch in name):
        unsafe("NUL, control or format character")
    if "\\" in name:
        unsafe("backslash (only forward slashes separate folders)")
    if name.startswith("/"):
        unsafe("absolute path")
    if ":" in name:
        unsafe("drive letter or colon")
    encoded = len(name.encode("utf-8"))
    if encoded > limits.max_name_bytes:
        refuse(
            ErrorCode.OPA_LIMIT_EXCEEDED,
            f"entry name of {encoded} bytes; at most {limits.max_name_bytes} are allowed",
            limit="max_name_bytes",
            name=name[:64],
        )
    parts = name.removesuffix("/").split("/")
    for part in parts:
        if part in ("", ".", ".."):
            unsafe("empty, '.' or '..' component")
        if part != part.strip() or part.endswith("."):
            # Windows drops trailing dots and spaces: "a." and "a" would be one file.
            unsafe("component with leading or trailing space, or trailing dot")
    if len(parts) > limits.max_depth:
        refuse(
            ErrorCode.OPA_LIMIT_EXCEEDED,
            f"entry {name!r} is {len(parts)} levels deep; at most {limits.max_depth} are allowed",
            limit="max_depth",
            name=name,
        )


def collision_key(name: str) -> str:
    """What a case-insensitive, normalising file system would make of ``name``."""
    folded = unicodedata.normalize("NFKC", name.removesuffix("/")).casefold()
    return unicodedata.normalize("NFKC", folded)


def check_unique(names: list[str]) -> None:
    """Refuse duplicate names (also after folding) and a file where a folder is needed."""
    files: dict[str, str] = {}
    folders: dict[str, str] = {}
    for name in names:
        key = collision_key(name)
        seen = files.get(key) or folders.get(key)
        if seen is not None:
            refuse(
                ErrorCode.OPA_DUPLICATE_ENTRY,
                f"entries {seen!r} and {name!r} have the same name"
                + ("" if seen == name else " after case folding and Unicode normalisation"),
                first=seen,
                second=name,
            )
        (folders if name.endswith("/") else files)[key] = name
    for key, name in files.items():
        parts = key.split("/")
        for depth in range(1, len(parts)):
            parent = "/".join(parts[:depth])
            if parent in files:
                refuse(
                    ErrorCode.OPA_DUPLICATE_ENTRY,
                    f"file {files[parent]!r} sits where {name!r} needs a folder",
                    first=files[parent],
                    second=name,
                )
