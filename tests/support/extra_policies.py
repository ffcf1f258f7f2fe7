"""An operator's own policy files for a test's stack (``GATEHOUSE_EXTRA_POLICIES``):
profiles made from a shipped one with a few fields changed, Cedar policy sets, and
the catalog read again with them and without them afterwards."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from policies import catalog

__all__ = ["extra_policies", "write_profile"]


def write_profile(folder: Path, profile_id: str, base: str = "default", **fields: Any) -> Path:
    """``folder/profiles/<profile_id>.json``: the shipped profile ``base`` with ``fields``
    put in place of its own (``approval`` merged key by key)."""
    shipped = Path(catalog.__file__).with_name("profiles") / f"{base}.json"
    profile: dict[str, Any] = json.loads(shipped.read_text())
    profile["profile_id"] = profile_id
    approval = fields.pop("approval", None)
    if approval is not None:
        profile["approval"] = {**profile.get("approval", {}), **approval}
    profile.update(fields)
    path = folder / "profiles" / f"{profile_id}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(profile))
    return path


@contextmanager
def extra_policies(folder: Path) -> Iterator[Path]:
    """The shim and the worker of this process read ``folder``'s policy files too."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(catalog.EXTRA_POLICIES_ENV, str(folder))
        catalog.reload()
        try:
            yield folder
        finally:
            patch.delenv(catalog.EXTRA_POLICIES_ENV)
            catalog.reload()
