"""``read_archive``: everything is validated before anything is stored or extracted.

Order: size of the file → ZIP structure (end record, directory, local headers,
overlaps, encryption, links) → names (safety, duplicates, limits) → sizes and
ratios from the headers → every entry streamed under its caps (CRC, true size,
SHA-256) → manifest → prompt → history → signature. The first defect refuses
the whole archive with its code; nothing is written anywhere.
"""

from __future__ import annotations

import datetime as dt
import hashlib
from pathlib import Path

from pydantic import ValidationError

from contracts import ErrorCode, strict_loads
from opa_format._limits import ArchiveLimits
from opa_format._manifest import JarSection, parse_jar
from opa_format._model import Archive, Entry, ExecutionMode, History, Manifest
from opa_format._paths import check_name, check_unique
from opa_format._refuse import refuse
from opa_format._signature import MANIFEST, is_signature_file, verify_archive_signature
from opa_format._trust import TrustStore
from opa_format._zip import ZipEntry, ZipOverflowError, iter_data, read_directory

__all__ = ["SUPPORTED_OPA_VERSIONS", "archive_name", "read_archive"]

SUPPORTED_OPA_VERSIONS = ("0.1", "0.1.0")
_MODES: tuple[ExecutionMode, ...] = ("interactive", "batch", "autonomous")


def archive_name(filename: str) -> str:
    """OPA_ARCHIVE_NAME: the base name without ``.opa`` or ``.opa.jar``."""
    base = filename.replace("\\", "/").rsplit("/", 1)[-1]
    for suffix in (".opa.jar", ".opa"):
        if base.lower().endswith(suffix):
            return base[: -len(suffix)]
    return base


def read_archive(
    source: bytes | Path,
    *,
    limits: ArchiveLimits | None = None,
    trust: TrustStore | None = None,
    name: str | None = None,
    now: dt.datetime | None = None,
) -> Archive:
    """Validate an archive completely and return it; ``GatehouseError`` on any defect.

    ``trust`` is the store signers are checked against (none: every signed
    archive is refused as untrusted). ``now`` is when certificates must be
    valid (default: the current time).
    """
    limits = limits or ArchiveLimits()
    trust = trust if trust is not None else TrustStore()
    if isinstance(source, Path):
        size = source.stat().st_size
        _check_archive_size(size, limits)
        data = source.read_bytes()
        name = name or archive_name(source.name)
    else:
        data = source
    _check_archive_size(len(data), limits)
    zip_entries = read_directory(data, limits)
    for entry in zip_entries:
        check_name(entry.name, limits)
    check_unique([e.name for e in zip_entries])
    _check_header_sizes(zip_entries, len(data), limits)

    wanted = {MANIFEST: limits.max_manifest_bytes}
    for e in zip_entries:
        if is_signature_file(e.name):
            wanted[e.name] = limits.max_manifest_bytes
    manifest_entry = next((e for e in zip_entries if e.name == MANIFEST), None)
    if manifest_entry is None:
        refuse(ErrorCode.OPA_MANIFEST_INVALID, f"the archive has no {MANIFEST}")
    kept: dict[str, bytes] = {}
    entries: list[Entry] = []
    total = 0
    # Small, known files are kept; which ones depends on the manifest, so read it first.
    manifest_bytes = _read_small(data, manifest_entry, limits.max_manifest_bytes, "manifest")
    sections = parse_jar(manifest_bytes, MANIFEST, ErrorCode.OPA_MANIFEST_INVALID)
    manifest = _manifest(sections[0], limits)
    wanted[manifest.prompt_file] = limits.max_prompt_bytes
    wanted[manifest.session_file] = limits.max_history_bytes
    for e in zip_entries:
        digest, size, content = _stream(data, e, limits, total, keep=e.name in wanted)
        total += size
        if content is not None:
            kept[e.name] = content
        entries.append(
            Entry(
                name=e.name,
                size=size,
                compressed_size=e.compressed_size,
                sha256=digest,
                is_dir=e.is_dir,
            )
        )
    for special, cap in wanted.items():
        if special in kept and len(kept[special]) > cap:
            refuse(
                ErrorCode.OPA_LIMIT_EXCEEDED,
                f"{special} is {len(kept[special])} bytes; at most {cap} are allowed",
                limit="max_manifest_bytes" if special == MANIFEST else "special_file_bytes",
                name=special,
            )
    prompt = _prompt(manifest, kept, entries)
    history = _history(manifest, kept, entries)
    digests = {e.name: e.sha256 for e in entries if not e.is_dir}
    signature = verify_archive_signature(
        manifest_bytes,
        sections=sections,
        digests=digests,
        signature_files={n: kept[n] for n in kept if is_signature_file(n)},
        trust=trust,
        now=now or dt.datetime.now(dt.UTC),
    )
    return Archive(
        name=name or "archive",
        sha256=hashlib.sha256(data).hexdigest(),
        size=len(data),
        manifest=manifest,
        prompt=prompt,
        history=history,
        entries=tuple(entries),
        signature=signature,
        data=data,
    )


def _check_archive_size(size: int, limits: ArchiveLimits) -> None:
    if size > limits.max_archive_bytes:
        refuse(
            ErrorCode.OPA_LIMIT_EXCEEDED,
            f"the archive is {size} bytes; at most {limits.max_archive_bytes} are allowed",
            limit="max_archive_bytes",
            value=size,
        )


def _check_header_sizes(entries: list[ZipEntry], archive_size: int, limits: ArchiveLimits) -> None:
    """What the headers claim, judged first; the streaming below holds them to it."""
    total = 0
    for e in entries:
        if e.size > limits.max_entry_bytes:
            refuse(
                ErrorCode.OPA_LIMIT_EXCEEDED,
                f"entry {e.name!r} is {e.size} bytes; at most {limits.max_entry_bytes} are allowed",
                limit="max_entry_bytes",
                name=e.name,
            )
        if e.size > limits.ratio_floor_bytes and e.size > e.compressed_size * limits.max_ratio:
            refuse(
                ErrorCode.OPA_ZIP_BOMB,
                f"entry {e.name!r} expands {e.size} / {max(e.compressed_size, 1)} times"
                f" (at most {limits.max_ratio})",
                name=e.name,
            )
        total += e.size
    if total > limits.max_total_bytes:
        refuse(
            ErrorCode.OPA_LIMIT_EXCEEDED,
            f"the entries hold {total} bytes; at most {limits.max_total_bytes} are allowed",
            limit="max_total_bytes",
            value=total,
        )
    if total > limits.ratio_floor_bytes and total > archive_size * limits.max_ratio:
        refuse(
            ErrorCode.OPA_ZIP_BOMB,
            f"the archive expands {total} / {archive_size} times (at most {limits.max_ratio})",
        )


def _stream(
    data: bytes, e: ZipEntry, limits: ArchiveLimits, total: int, *, keep: bool
) -> tuple[str, int, bytes | None]:
    caps = {
        "max_entry_bytes": limits.max_entry_bytes,
        "max_total_bytes": limits.max_total_bytes - total,
        "max_ratio": max(limits.ratio_floor_bytes, e.compressed_size * limits.max_ratio),
    }
    cap = min(caps.values())
    sha = hashlib.sha256()
    size = 0
    parts: list[bytes] = []
    try:
        for chunk in iter_data(data, e, cap):
            sha.update(chunk)
            size += len(chunk)
            if keep:
                parts.append(chunk)
    except ZipOverflowError:
        which = next(k for k, v in caps.items() if v == cap)
        code = ErrorCode.OPA_ZIP_BOMB if which == "max_ratio" else ErrorCode.OPA_LIMIT_EXCEEDED
        refuse(
            code, f"entry {e.name!r} expands past {which} ({cap} bytes)", name=e.name, limit=which
        )
    return sha.hexdigest(), size, b"".join(parts) if keep else None


def _read_small(data: bytes, e: ZipEntry, cap: int, what: str) -> bytes:
    if e.size > cap:
        refuse(
            ErrorCode.OPA_LIMIT_EXCEEDED,
            f"the {what} is {e.size} bytes; at most {cap} are allowed",
            limit=f"max_{what}_bytes",
            name=e.name,
        )
    try:
        return b"".join(iter_data(data, e, cap))
    except ZipOverflowError:
        refuse(ErrorCode.OPA_LIMIT_EXCEEDED, f"the {what} expands past {cap} bytes", name=e.name)


def _manifest(main: JarSection, limits: ArchiveLimits) -> Manifest:
    a = main.attributes
    version = a.get("Manifest-Version")
    if version is None or not version.replace(".", "").isdigit():
        refuse(ErrorCode.OPA_MANIFEST_INVALID, "the manifest lacks a valid Manifest-Version")
    opa_version = a.get("OPA-Version")
    if opa_version is None:
        refuse(ErrorCode.OPA_MANIFEST_INVALID, "the manifest lacks OPA-Version")
    if opa_version not in SUPPORTED_OPA_VERSIONS:
        refuse(
            ErrorCode.OPA_VERSION_UNSUPPORTED,
            f"OPA-Version {opa_version!r} is not supported (supported: "
            f"{', '.join(SUPPORTED_OPA_VERSIONS)})",
            opa_version=opa_version,
        )
    mode = a.get("Execution-Mode", "interactive")
    if mode not in _MODES:
        refuse(
            ErrorCode.OPA_MANIFEST_INVALID,
            f"Execution-Mode {mode!r} is not one of {', '.join(_MODES)}",
        )
    prompt_file = a.get("Prompt-File", "prompt.md")
    session_file = a.get("Session-File", "session/history.json")
    data_root = a.get("Data-Root", "data/")
    for key, path in (("Prompt-File", prompt_file), ("Session-File", session_file)):
        check_name(path, limits)
        if path.endswith("/") or path == MANIFEST:
            refuse(ErrorCode.OPA_MANIFEST_INVALID, f"{key} {path!r} is not a file path")
    check_name(data_root, limits)
    return Manifest(
        manifest_version=version,
        opa_version=opa_version,
        prompt_file=prompt_file,
        session_file=session_file,
        data_root=data_root if data_root.endswith("/") else data_root + "/",
        execution_mode=next(m for m in _MODES if m == mode),
        title=a.get("Title"),
        description=a.get("Description"),
        agent_hint=a.get("Agent-Hint"),
        created_by=a.get("Created-By"),
        created_at=a.get("Created-At"),
        schema_extensions=tuple(a.get("Schema-Extensions", "").split()),
        attributes=dict(a),
    )


def _prompt(manifest: Manifest, kept: dict[str, bytes], entries: list[Entry]) -> str:
    raw = kept.get(manifest.prompt_file)
    if raw is None:
        is_dir = any(e.name == manifest.prompt_file + "/" for e in entries)
        refuse(
            ErrorCode.OPA_PROMPT_INVALID,
            f"the prompt file {manifest.prompt_file!r} is " + ("a folder" if is_dir else "missing"),
            name=manifest.prompt_file,
        )
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        refuse(
            ErrorCode.OPA_PROMPT_INVALID,
            f"the prompt file {manifest.prompt_file!r} is not UTF-8 ({exc.reason} at {exc.start})",
            name=manifest.prompt_file,
        )


def _history(manifest: Manifest, kept: dict[str, bytes], entries: list[Entry]) -> History | None:
    raw = kept.get(manifest.session_file)
    if raw is None:
        if "Session-File" in manifest.attributes:
            refuse(
                ErrorCode.OPA_HISTORY_INVALID,
                f"the manifest names {manifest.session_file!r}, which the archive does not hold",
            )
        return None
    try:
        body = strict_loads(raw.decode("utf-8"))
        return History.model_validate(body)
    except ValidationError as exc:
        where = "; ".join(
            f"{'/'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()[:3]
        )
        why = f"does not match the OPA history schema ({where})"
    except (UnicodeDecodeError, ValueError) as exc:
        why = f"is not JSON ({exc})"
    refuse(
        ErrorCode.OPA_HISTORY_INVALID,
        f"{manifest.session_file} {why[:300]}",
        name=manifest.session_file,
    )
