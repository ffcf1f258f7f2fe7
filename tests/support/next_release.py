"""The next release, for upgrade tests: this code, deployed as a copy with one more migration.

An upgrade test needs two releases that differ by a database migration. The
current code cannot play the *old* release with its newest migration held back
(its workers write that migration's table the moment they start), so the
current code is the old release and the next one is built here: a copy of the
source tree on disk, its ``ledger/migrations`` holding one migration more. Its
processes import the copy, not this tree (a worker: ``PYTHONPATH`` first and
``PYTHONSAFEPATH``, so the working folder is not put ahead of it; the shim and
the CLI: started in the copy). Nothing in the product is patched or switched on
for it: the copy runs the same entry points a deploy would.

The migration is the kind a release adds while runs are in flight: a nullable
column and an index on ``runs``, a table every run writes. Old workers kept to
drain their runs go on writing that table after it was applied.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from ledger._migrate import migration_files

__all__ = ["NextRelease", "build_next_release"]

_ROOT = Path(__file__).resolve().parents[2]
# What a deploy ships: the packages the project installs, and the DBOS settings file.
_PACKAGES = ("contracts", "ledger", "opa_format", "policies", "shim", "vendor", "worker")
_FILES = ("dbos-config.yaml",)

_MIGRATION = """\
-- Gatehouse ledger, version {version} (the next release of an upgrade test): a note
-- an operator may leave on a run. Nullable with no default, so rows written by the
-- release before it (still draining its runs) stay valid.

ALTER TABLE runs ADD COLUMN operator_note TEXT;
CREATE INDEX runs_operator_note ON runs (operator_note);
"""


@dataclass(frozen=True)
class NextRelease:
    tree: Path  # the copy: run the shim and the CLI in it
    migration: int  # the version of the migration only it has

    def worker_env(self) -> dict[str, str]:
        """What a worker process of this release needs on top of its settings."""
        return {"PYTHONPATH": str(self.tree), "PYTHONSAFEPATH": "1"}

    def cli(self, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
        """``gatehouse <args>`` of this release (run in its tree, so it imports it)."""
        return subprocess.run(
            [sys.executable, "-c", "from shim.cli import main; main()", *args],
            cwd=self.tree,
            env={**os.environ, **env},
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )


def build_next_release(into: Path) -> NextRelease:
    """Copy this release's sources under ``into`` and add its next migration."""
    tree = into / "next-release"
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for package in _PACKAGES:
        shutil.copytree(_ROOT / package, tree / package, ignore=ignore)
    for name in _FILES:
        shutil.copy2(_ROOT / name, tree / name)
    version = migration_files()[-1][0] + 1
    path = tree / "ledger" / "migrations" / f"{version:04d}_operator_note.sql"
    path.write_text(_MIGRATION.format(version=version), encoding="utf-8")
    return NextRelease(tree, version)
