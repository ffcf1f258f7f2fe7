"""An earlier release, for upgrade tests: the product as it was at a given commit.

``git archive`` of the commit's product packages into a folder; a worker of that
release imports the folder (``PYTHONPATH`` first and ``PYTHONSAFEPATH``, as
``tests/support/next_release.py`` does for the next release). Used to show that
runs a previous layout of the code started still finish under this one.

The history is needed: a clone without it (shallow) skips the test, saying so,
except in CI, where a missing commit is a failure.
"""

from __future__ import annotations

import os
import subprocess
import tarfile
from dataclasses import dataclass
from pathlib import Path

import pytest

__all__ = ["LAST_OF_GATEHOUSE_5", "LAST_OF_GATEHOUSE_6", "OldRelease", "old_release"]

_ROOT = Path(__file__).resolve().parents[2]
_PACKAGES = ("contracts", "ledger", "opa_format", "policies", "shim", "vendor", "worker")
_FILES = ("dbos-config.yaml",)

# The last commit of application version gatehouse-5 (the last that landed before it),
# whose planner and tool calls were DBOS steps (issue 47): the workflows it leaves in
# flight finish on its workers, and its database is upgraded by this release.
LAST_OF_GATEHOUSE_5 = "7b18fb6e8fe67615841d8b4c7bca637230940f35"
# The last commit of gatehouse-6 (the last that landed before it), whose stretches after
# a decision ran the flow from its start against the ledger (issue 47: gatehouse-7's
# start from the continuation their park wrote).
LAST_OF_GATEHOUSE_6 = "7a2bb123cb7a76ec810e9dad9869890e09688d8b"


@dataclass(frozen=True)
class OldRelease:
    commit: str
    tree: Path

    def worker_env(self) -> dict[str, str]:
        """What a worker process of this release needs on top of its settings."""
        return {"PYTHONPATH": str(self.tree), "PYTHONSAFEPATH": "1"}


def old_release(tmp: Path, commit: str) -> OldRelease:
    """The product at ``commit``, unpacked under ``tmp``."""
    tree = tmp / f"release-{commit[:12]}"
    archive = tmp / f"release-{commit[:12]}.tar"
    done = subprocess.run(
        ["git", "-C", str(_ROOT), "archive", "-o", str(archive), commit, *_PACKAGES, *_FILES],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        why = f"commit {commit[:12]} is not in this clone's history: {done.stderr.strip()}"
        if os.environ.get("CI"):
            pytest.fail(why)
        pytest.skip(why)
    tree.mkdir(parents=True)
    with tarfile.open(archive) as tar:
        tar.extractall(tree, filter="data")
    return OldRelease(commit, tree)
