"""``write_archive``: archives Gatehouse writes, optionally signed, readable by standard tools.

The manifest always carries a ``Name:`` section with the ``SHA-256-Digest`` of
every file, so a signature (``.SF`` over the manifest, PKCS#7 over the
``.SF``) covers everything and ``read_archive`` verifies it with the same code
it uses for anyone else's archive. ``META-INF/extensions/`` entries of a source
archive are carried over unchanged (unknown extensions must survive a rewrite).
Timestamps are fixed, so the same input gives the same bytes.
"""

from __future__ import annotations

import io
import json
import zipfile
from collections.abc import Mapping

from contracts import ErrorCode
from opa_format._cms import SigningKey, sign_block
from opa_format._limits import ArchiveLimits
from opa_format._manifest import write_jar
from opa_format._model import Archive, History, Manifest
from opa_format._paths import check_name, check_unique
from opa_format._refuse import refuse
from opa_format._signature import MANIFEST, b64_sha256, is_signature_file
from opa_format._zip import iter_data, read_directory

__all__ = ["EXTENSIONS_PREFIX", "write_archive"]

EXTENSIONS_PREFIX = "META-INF/extensions/"
SIGNATURE_STEM = "META-INF/SIGNATURE"
_EPOCH = (2020, 1, 1, 0, 0, 0)
_CREATED_BY = "Gatehouse"


def _main_attributes(manifest: Manifest, *, has_history: bool) -> dict[str, str]:
    known = {
        "Manifest-Version": manifest.manifest_version,
        "OPA-Version": manifest.opa_version,
        "Prompt-File": manifest.prompt_file,
        "Created-By": manifest.created_by or _CREATED_BY,
        "Created-At": manifest.created_at,
        "Title": manifest.title,
        "Description": manifest.description,
        "Agent-Hint": manifest.agent_hint,
        "Execution-Mode": manifest.execution_mode,
        "Data-Root": manifest.data_root if manifest.data_root != "data/" else None,
        # Named only with a history to find: a named Session-File must exist.
        "Session-File": manifest.session_file if has_history else None,
        "Schema-Extensions": " ".join(manifest.schema_extensions) or None,
    }
    out = {k: v for k, v in known.items() if v is not None}
    for key, value in manifest.attributes.items():
        if key not in out and key.lower() not in {k.lower() for k in known} and key != "Name":
            out[key] = value
    return out


def _extensions(source: Archive, limits: ArchiveLimits) -> dict[str, bytes]:
    out: dict[str, bytes] = {}
    for entry in read_directory(source.data, limits):
        if entry.name.startswith(EXTENSIONS_PREFIX) and not entry.is_dir:
            out[entry.name] = b"".join(iter_data(source.data, entry, limits.max_entry_bytes))
    return out


def write_archive(
    *,
    prompt: str,
    manifest: Manifest | None = None,
    history: History | None = None,
    files: Mapping[str, bytes] | None = None,
    keep_extensions_from: Archive | None = None,
    signing_key: SigningKey | None = None,
    limits: ArchiveLimits | None = None,
) -> bytes:
    """A new ``.opa`` (bytes). ``files`` are data and output files by archive path."""
    limits = limits or ArchiveLimits()
    manifest = manifest or Manifest()
    contents: dict[str, bytes] = {manifest.prompt_file: prompt.encode("utf-8")}
    if history is not None:
        body = history.model_dump(mode="json", exclude_none=True)
        contents[manifest.session_file] = json.dumps(body, indent=2, ensure_ascii=False).encode()
    if keep_extensions_from is not None:
        contents.update(_extensions(keep_extensions_from, limits))
    for name, data in (files or {}).items():
        if name in contents or name == MANIFEST or is_signature_file(name):
            refuse(ErrorCode.OPA_DUPLICATE_ENTRY, f"{name!r} is a reserved or repeated name")
        contents[name] = data
    for name in contents:
        check_name(name, limits)
    check_unique([MANIFEST, *contents])

    sections = [_main_attributes(manifest, has_history=history is not None)]
    sections += [{"Name": n, "SHA-256-Digest": b64_sha256(contents[n])} for n in sorted(contents)]
    manifest_bytes, raws = write_jar(sections)
    head: dict[str, bytes] = {MANIFEST: manifest_bytes}
    if signing_key is not None:
        sf_sections = [
            {
                "Signature-Version": "1.0",
                "Created-By": _CREATED_BY,
                "SHA-256-Digest-Manifest": b64_sha256(manifest_bytes),
                "SHA-256-Digest-Manifest-Main-Attributes": b64_sha256(raws[0]),
            }
        ]
        sf_sections += [
            {"Name": s["Name"], "SHA-256-Digest": b64_sha256(raw)}
            for s, raw in zip(sections[1:], raws[1:], strict=True)
        ]
        sf, _ = write_jar(sf_sections)
        head[f"{SIGNATURE_STEM}.SF"] = sf
        head[f"{SIGNATURE_STEM}.{signing_key.block_extension}"] = sign_block(sf, signing_key)

    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as out:
        for name, data in [*head.items(), *sorted(contents.items())]:
            info = zipfile.ZipInfo(name, date_time=_EPOCH)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.create_system = 3
            info.external_attr = 0o100644 << 16
            out.writestr(info, data)
    return buffer.getvalue()
