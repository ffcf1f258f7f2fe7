"""``gatehouse worker``: one worker in the foreground, as its own program (``python -m worker``).

The shim never imports worker code: this process becomes the worker.
"""

from __future__ import annotations

import argparse
import os
import sys

__all__ = ["add_arguments", "run"]

_WORKER_ENV = """\
A worker reads its settings from the environment (docs/configuration.md):
  GATEHOUSE_DATABASE_URL, GATEHOUSE_EXECUTOR_ID (stable, one per worker),
  GATEHOUSE_APP_VERSION, GATEHOUSE_WORKSPACE_ROOT, GATEHOUSE_WORKER_CONCURRENCY,
  GATEHOUSE_QUEUE_POLL_S, GATEHOUSE_HEARTBEAT_S, GATEHOUSE_DEAD_AFTER_S,
  GATEHOUSE_MODEL_BASE_URL, GATEHOUSE_MODEL_NAME, GATEHOUSE_MODEL_API_KEY,
  GATEHOUSE_OPENCODE_MODEL_URL, GATEHOUSE_OPENCODE_MODEL, GATEHOUSE_OPENCODE_DIR,
  GATEHOUSE_OPENCODE_STATE, GATEHOUSE_OPA_TRUST_DIR, GATEHOUSE_OPA_SIGNING_KEY,
  GATEHOUSE_OPA_SIGNING_CERT, RANDOM_SEED."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.epilog = f"{_WORKER_ENV}\n\n{p.epilog}"


def run(args: argparse.Namespace) -> int:
    os.execv(sys.executable, [sys.executable, "-m", "worker"])  # noqa: S606  (fixed argv, no shell)
