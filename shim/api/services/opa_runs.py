"""Runs from OPA archives at the shim: the archive intake of ``POST /intent``, the output route.

An upload is validated completely (``opa_format.read_archive``, against the
trust store) before anything is stored, and so is everything the shim decides
from it: the execution mode, the recipe, the signing rule, the objective's
length. A refusal raises its code, which the app records as a security event
like every refused request. An accepted archive becomes an ordinary
``IntentRequest`` (its context is the objective) and goes to ``submit``
together with its bytes, which stores both in the one submit transaction.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from contracts import (
    Budgets,
    ErrorCode,
    GatehouseError,
    IntentAccepted,
    IntentRequest,
    Mode,
    OpaPolicy,
)
from contracts.opa_run import OpaExecutionMode, OpaJob, OpaSigner
from ledger import intents, now_iso, opa_runs
from opa_format import (
    Archive,
    TemplateVariables,
    TrustStore,
    archive_name,
    check_unsigned_allowed,
    objective_of,
    read_archive,
)
from policies import catalog
from shim.api.http import problems
from shim.api.services import reads
from shim.api.services.core import Service
from shim.api.services.submit import submit
from shim.tokens import Identity

__all__ = [
    "ARCHIVE_MEDIA_TYPES",
    "MEDIA_TYPE",
    "ArchiveUpload",
    "autonomous_budgets",
    "choose_recipe",
    "output_archive",
    "submit_archive",
]

# An OPA archive's media type (a run's output archive is served as one).
MEDIA_TYPE = opa_runs.MEDIA_TYPE
ARCHIVE_MEDIA_TYPES = frozenset({MEDIA_TYPE, "application/java-archive"})
# What {{extracted_path}} becomes: the worker extracts the archive and sets this variable.
EXTRACTED_ROOT = "$OPA_EXTRACTED_ROOT"
# An intent's objective is ShortText; the archive's context must fit it.
_OBJECTIVE_MAX: int = IntentRequest.model_json_schema()["properties"]["objective"]["maxLength"]


@dataclass(frozen=True)
class ArchiveUpload:
    """A posted archive and what the submitter asked for beside it (query parameters)."""

    name: str  # the file name, ending .opa or .opa.jar
    content: bytes
    mode: OpaExecutionMode | None  # None: the manifest's Execution-Mode
    recipe: str | None
    policy_profile: str
    tool_pool: str


def choose_recipe(policy: OpaPolicy, hint: str | None, asked: str | None) -> str:
    """The archive's Agent-Hint if the profile allows it, else the submitter's, else the default."""
    if hint is not None and hint.strip() in policy.recipes:
        return hint.strip()
    if asked is not None:
        if asked not in policy.recipes:
            raise GatehouseError(
                ErrorCode.OPA_RECIPE_NOT_ALLOWED,
                f"the policy profile does not let archives run under recipe {asked!r}",
                {"recipe": asked, "allowed": list(policy.recipes)},
            )
        return asked
    if policy.default_recipe is None:
        raise GatehouseError(
            ErrorCode.OPA_RECIPE_NOT_ALLOWED,
            "the policy profile names no recipe for archives; pick a profile whose opa"
            " section allows one",
            {"allowed": list(policy.recipes)},
        )
    return policy.default_recipe


def autonomous_budgets(profile: Budgets, policy: OpaPolicy | None = None) -> Budgets:
    """At most the profile's autonomous turns and tokens (by default the spec's recommended
    50 and 200,000), never wider than the profile's budgets."""
    policy = policy or OpaPolicy()
    most_turns, most_tokens = policy.autonomous_max_turns, policy.autonomous_max_tokens
    turns, tokens = profile.max_model_turns, profile.max_tokens
    return Budgets(
        max_model_turns=min(most_turns, turns or most_turns),
        max_tokens=min(most_tokens, tokens or most_tokens),
    )


def submit_archive(
    service: Service, upload: ArchiveUpload, key: str | None, who: Identity
) -> tuple[bool, IntentAccepted]:
    """Validate the archive and what is asked of it, then submit it as an intent."""
    trust = _trust(service.settings.opa_trust_dir)
    archive = read_archive(upload.content, trust=trust, name=archive_name(upload.name))
    mode = upload.mode or archive.manifest.execution_mode
    profile = catalog.profile(upload.policy_profile).model
    recipe = choose_recipe(profile.opa, archive.manifest.agent_hint, upload.recipe)
    check_unsigned_allowed(
        archive, mode, allow_unsigned_autonomous=profile.opa.allow_unsigned_autonomous
    )
    # A repeated Idempotency-Key keeps the objective it was first rendered with ({{timestamp}}).
    objective = (
        _prior_objective(service, who.name, key, archive.name, archive.sha256) if key else None
    )
    if objective is None:
        variables = TemplateVariables(
            archive_name=archive.name,
            extracted_path=EXTRACTED_ROOT,
            timestamp=now_iso(),
            agent=recipe,
        )
        objective = objective_of(archive, variables)
    if len(objective) > _OBJECTIVE_MAX:
        raise GatehouseError(
            ErrorCode.OPA_CONTEXT_TOO_LONG,
            f"the archive's context is {len(objective)} characters as an objective; an"
            f" intent's objective holds at most {_OBJECTIVE_MAX}",
            {"length": len(objective), "limit": _OBJECTIVE_MAX},
        )
    budgets = autonomous_budgets(profile.budgets, profile.opa) if mode == "autonomous" else None
    request, intake = _intent(
        upload, archive, mode=mode, recipe=recipe, objective=objective, budgets=budgets
    )
    return submit(service, request, key=key, who=who, opa=intake)


def _trust(folder: Path) -> TrustStore:
    """Read at every upload, so a certificate added or removed counts from the next one."""
    try:
        return TrustStore.load(folder)
    except (OSError, ValueError) as exc:
        raise GatehouseError(
            ErrorCode.INTERNAL_ERROR, f"the OPA trust store {folder} cannot be read: {exc}"
        ) from exc


def _prior_objective(
    service: Service, submitter: str, key: str, name: str, sha256: str
) -> str | None:
    """The objective of the run this key made from this very archive; None: no run yet.

    The request digest the service compares a repeated key by does not cover the
    archive, so another archive under a used key is refused here.
    """
    with service.db.engine.connect() as conn:
        found = intents.find_by_idempotency_key(conn, submitter, key)
        if found is None:
            return None
        prior = opa_runs.get(conn, found.run_id)
        request = intents.request_for_run(conn, found.run_id)
    if prior is None or prior.archive_sha256 != sha256 or prior.archive_name != name:
        raise GatehouseError(
            ErrorCode.IDEMPOTENCY_CONFLICT,
            "this Idempotency-Key was already used for a different intent",
            {"run_id": found.run_id},
        )
    return None if request is None else request.objective


def _intent(
    upload: ArchiveUpload,
    archive: Archive,
    *,
    mode: OpaExecutionMode,
    recipe: str,
    objective: str,
    budgets: Budgets | None,
) -> tuple[IntentRequest, opa_runs.Intake]:
    signer = archive.signature.signer
    try:
        request = IntentRequest(
            recipe=recipe,
            objective=objective,
            mode=Mode.FULL_CYCLE,
            policy_profile=upload.policy_profile,
            tool_pool=upload.tool_pool,
            budgets=budgets,
        )
        job = OpaJob(
            archive_name=archive.name,  # OPA_ARCHIVE_NAME: the file name without .opa
            archive_sha256=archive.sha256,
            opa_version=archive.manifest.opa_version,
            execution_mode=mode,
            data_root=archive.manifest.data_root,
            accepted_at=now_iso(),  # its signature was verified now
        )
        opa_signer = None if signer is None else OpaSigner.model_validate(signer.model_dump())
    except ValidationError as exc:
        raise GatehouseError(
            ErrorCode.INVALID_REQUEST, "the archive cannot be made an intent", problems(exc)
        ) from exc
    return request, opa_runs.Intake(job=job, signer=opa_signer, content=upload.content)


def output_archive(service: Service, run_id: str, who: Identity) -> bytes:
    """The run's output archive; ``opa_output_unavailable`` says why there is none."""
    view = reads.run(service, run_id, who)  # run_not_found, and a submitter reads only its own
    if view.opa is None:
        raise GatehouseError(
            ErrorCode.OPA_OUTPUT_UNAVAILABLE,
            f"run {run_id!r} was not submitted as an OPA archive; it has no output archive",
            {"reason": "not_an_opa_run"},
        )
    with service.db.engine.connect() as conn:
        content = opa_runs.output_bytes(conn, run_id)
    if content is None:
        raise GatehouseError(
            ErrorCode.OPA_OUTPUT_UNAVAILABLE,
            f"run {run_id!r} has no output archive yet (it is {view.status.value})",
            {"reason": "not_packed_yet", "status": view.status.value},
        )
    return content
