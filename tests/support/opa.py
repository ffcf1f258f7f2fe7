"""Helpers for runs from OPA archives: build an archive, submit it, read what came back."""

from __future__ import annotations

import datetime as dt

import opa

from contracts import IntentRequest, Role
from contracts.opa_run import OpaJob
from ledger.opa_runs import Intake
from opa_format import TemplateVariables, archive_name, objective_of, read_archive
from shim._auth import Identity
from shim._service import Service
from shim.settings import ShimSettings
from tests.support.stack import Stack

__all__ = ["batch_archive", "submit_archive"]


def batch_archive(prompt: str, data: dict[str, bytes]) -> bytes:
    """An unsigned batch archive, as the opa-archive library writes it."""
    archive = opa.OpaArchive(
        manifest=opa.Manifest(title="e2e", execution_mode=opa.ExecutionMode.BATCH),
        prompt=opa.Prompt(prompt),
    )
    for name, content in data.items():
        archive.add_data_bytes(name, content)
    out: bytes = archive.to_bytes()
    return out


def submit_archive(stack: Stack, data: bytes, name: str, *, recipe: str, profile: str) -> str:
    """Submit an archive the way the shim's intake does; the run id."""
    now = dt.datetime.now(dt.UTC)
    archive = read_archive(data, name=archive_name(name))
    variables = TemplateVariables(
        archive_name=archive.name,
        extracted_path="$OPA_EXTRACTED_ROOT",
        timestamp=now.isoformat(),
        agent=recipe,
    )
    request = IntentRequest(
        recipe=recipe, objective=objective_of(archive, variables), policy_profile=profile
    )
    job = OpaJob(
        archive_name=archive.name,
        archive_sha256=archive.sha256,
        opa_version=archive.manifest.opa_version,
        execution_mode=archive.manifest.execution_mode,
        data_root=archive.manifest.data_root,
        accepted_at=now.isoformat(),
    )
    service = Service(ShimSettings.from_env({"GATEHOUSE_DATABASE_URL": stack.database_url}))
    try:
        who = Identity("alice", frozenset({Role.SUBMITTER}))
        _created, accepted = service.submit(request, None, who, opa=Intake(job, None, data))
    finally:
        service.close()
    return accepted.run_id
