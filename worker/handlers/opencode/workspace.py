"""Workspace snapshots: what a run's directory held before a turn, byte for byte.

The timeout ladder and crash reconciliation promise that no half-applied
turn survives: after a revert the workspace digest must equal the digest
taken before the turn, and when OpenCode's own revert falls short, the
snapshot puts every file back. A snapshot is also written to disk before the
prompt is sent, so a turn cut off by a crash can be undone by whichever
worker picks the run up.
"""

from __future__ import annotations

import base64
import hashlib
import json
import shutil
from dataclasses import dataclass
from pathlib import Path

from contracts import ErrorCode, GatehouseError, JsonObject, JsonValue, digest_of

__all__ = ["MAX_SNAPSHOT_BYTES", "Snapshot", "changes", "load", "restore", "take"]

# A workspace bigger than this is refused rather than half-protected.
MAX_SNAPSHOT_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True)
class Snapshot:
    files: dict[str, bytes]  # relative path -> content
    dirs: frozenset[str]  # relative directory paths

    @property
    def digests(self) -> dict[str, str]:
        return {path: hashlib.sha256(data).hexdigest() for path, data in self.files.items()}

    @property
    def digest(self) -> str:
        """The workspace digest: every file's path and SHA-256, and every directory."""
        files: JsonObject = dict(self.digests)
        dirs: list[JsonValue] = []
        dirs.extend(sorted(self.dirs))
        return digest_of({"files": files, "dirs": dirs})

    def save(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        doc = {
            "files": {p: base64.b64encode(d).decode("ascii") for p, d in self.files.items()},
            "dirs": sorted(self.dirs),
        }
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(doc), "utf-8")
        tmp.replace(path)


def take(root: Path) -> Snapshot:
    files: dict[str, bytes] = {}
    dirs: set[str] = set()
    total = 0
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if path.is_symlink():
            files[rel] = b"symlink:" + str(path.readlink()).encode("utf-8")
        elif path.is_dir():
            dirs.add(rel)
        elif path.is_file():
            data = path.read_bytes()
            total += len(data)
            if total > MAX_SNAPSHOT_BYTES:
                raise GatehouseError(
                    ErrorCode.HANDLER_FAILED,
                    f"the workspace holds more than {MAX_SNAPSHOT_BYTES} bytes; too big to"
                    " protect with a snapshot",
                )
            files[rel] = data
    return Snapshot(files=files, dirs=frozenset(dirs))


def load(path: Path) -> Snapshot | None:
    try:
        doc = json.loads(path.read_text("utf-8"))
    except (OSError, ValueError):
        return None
    return Snapshot(
        files={p: base64.b64decode(d) for p, d in doc["files"].items()},
        dirs=frozenset(doc["dirs"]),
    )


def restore(root: Path, snapshot: Snapshot) -> None:
    """Make ``root`` hold exactly what ``snapshot`` held."""
    current = take(root)
    for rel in sorted(set(current.files) - set(snapshot.files)):
        (root / rel).unlink(missing_ok=True)
    for rel in sorted(current.dirs - snapshot.dirs, reverse=True):
        shutil.rmtree(root / rel, ignore_errors=True)
    for rel in sorted(snapshot.dirs):
        (root / rel).mkdir(parents=True, exist_ok=True)
    for rel, data in snapshot.files.items():
        target = root / rel
        if data.startswith(b"symlink:"):
            continue  # a symlink is never followed or recreated by Gatehouse
        if current.files.get(rel) != data:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)


def changes(before: Snapshot, after: Snapshot) -> list[JsonObject]:
    """Each file a turn touched, with its SHA-256 before and after (None: absent)."""
    b, a = before.digests, after.digests
    return [
        {"path": path, "before": b.get(path), "after": a.get(path)}
        for path in sorted(set(b) | set(a))
        if b.get(path) != a.get(path)
    ]
