"""Helpers for runs from OPA archives: build an archive, submit it through the shim."""

from __future__ import annotations

import opa

from tests.support.stack import Stack

__all__ = ["OPA_MEDIA", "batch_archive", "submit_archive"]

OPA_MEDIA = "application/vnd.opa+zip"


def batch_archive(prompt: str, data: dict[str, bytes], *, mode: str = "batch") -> bytes:
    """An unsigned archive (batch unless said otherwise), as the opa-archive library writes it."""
    archive = opa.OpaArchive(
        manifest=opa.Manifest(title="e2e", execution_mode=opa.ExecutionMode(mode)),
        prompt=opa.Prompt(prompt),
    )
    for name, content in data.items():
        archive.add_data_bytes(name, content)
    out: bytes = archive.to_bytes()
    return out


def submit_archive(
    stack: Stack, data: bytes, name: str, *, recipe: str, profile: str, **query: str
) -> str:
    """``POST /intent`` with the archive, as ``gatehouse opa run`` sends it; the run id."""
    params = {"name": name, "recipe": recipe, "policy_profile": profile} | query
    r = stack.client.post(
        "/intent", content=data, params=params, headers={"Content-Type": OPA_MEDIA}
    )
    assert r.status_code == 202, r.text
    run_id: str = r.json()["run_id"]
    return run_id
