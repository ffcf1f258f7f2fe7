"""The pinned OpenCode: which version and package integrity this build runs.

``vendor/opencode/pin.json`` is the committed input (package, version, npm
integrity hash); ``scripts/setup.sh`` installs that version into
``vendor/opencode/node_modules`` and holds the installed package to the pin.
The supervisor checks again before it starts a server, and every turn's
evidence names the pin.
"""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import ValidationError

from contracts import Closed, ErrorCode, GatehouseError

__all__ = ["SETUP_TASK", "OpencodePin", "binary", "installed_pin", "read_pin"]


class OpencodePin(Closed):
    package: str
    version: str
    integrity: str


# What installs the pinned OpenCode (the plain ``setup`` does not: the demo needs none).
SETUP_TASK = "npx -y @jdxcode/mise run setup:opencode"


def _unavailable(message: str) -> GatehouseError:
    return GatehouseError(ErrorCode.EXECUTOR_UNAVAILABLE, message)


def read_pin(directory: Path) -> OpencodePin:
    if not directory.is_dir():  # as in the image, which carries no OpenCode
        raise _unavailable(
            f"OpenCode is not installed here (no folder {directory}, GATEHOUSE_OPENCODE_DIR"
            f" names another); from a checkout: {SETUP_TASK}"
        )
    try:
        return OpencodePin.model_validate_json((directory / "pin.json").read_text("utf-8"))
    except (OSError, ValidationError) as exc:
        raise _unavailable(f"cannot read the OpenCode pin {directory / 'pin.json'}: {exc}") from exc


def installed_pin(directory: Path) -> OpencodePin:
    """What npm installed, from its hidden lockfile; refused unless it is the pin."""
    pin = read_pin(directory)
    lock = directory / "node_modules" / ".package-lock.json"
    try:
        entry = json.loads(lock.read_text("utf-8"))["packages"][f"node_modules/{pin.package}"]
        got = OpencodePin(
            package=pin.package, version=entry["version"], integrity=entry["integrity"]
        )
    except (OSError, ValueError, KeyError, TypeError, ValidationError) as exc:
        raise _unavailable(f"OpenCode is not installed in {directory} (run: {SETUP_TASK})") from exc
    if got != pin:
        raise _unavailable(
            f"installed {got.package} {got.version} ({got.integrity[:20]}…) is not the pinned"
            f" {pin.version} ({pin.integrity[:20]}…); run: {SETUP_TASK}"
        )
    return pin


def binary(directory: Path) -> Path:
    path = directory / "node_modules" / ".bin" / "opencode"
    if not path.exists():
        raise _unavailable(f"no OpenCode binary at {path} (run: {SETUP_TASK})")
    return path
