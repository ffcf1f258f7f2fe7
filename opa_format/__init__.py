"""The OPA (Open Prompt Archive) format: reader, validator, signature check, writer.

Pure code: no database, no DBOS, no clock unless the caller leaves ``now``
out. The shim imports it to validate uploads and for ``gatehouse opa
inspect``; the worker imports it to extract archives into workspaces and to
pack outputs. It imports nothing of Gatehouse but ``contracts``. (Not named
``opa``: that is the ``opa-archive`` library's module.)

Every refusal is a ``contracts.GatehouseError`` with an ``opa_*`` code::

    read_archive(path | bytes, limits=, trust=, now=) -> Archive   validated, or refused
    extract(archive, into_new_dir, limits=) -> Path                0700, no links, no leftovers
    context_of / objective_of(archive, TemplateVariables)          system → history → prompt
    check_unsigned_allowed(archive, mode, allow_unsigned_autonomous=)
    write_archive(prompt=, manifest=, history=, files=, keep_extensions_from=, signing_key=)
    TrustStore.load(dir); trust_add / trust_list / trust_remove
"""

from opa_format._cms import SigningKey
from opa_format._context import (
    RESERVED_VARIABLES,
    ContextMessage,
    TemplateVariables,
    check_unsigned_allowed,
    context_of,
    objective_of,
    render_prompt,
)
from opa_format._extract import extract
from opa_format._limits import ArchiveLimits
from opa_format._model import (
    Archive,
    ContentBlock,
    Entry,
    ExecutionMode,
    History,
    HistoryMessage,
    Manifest,
    SignatureStatus,
    Signer,
)
from opa_format._reader import SUPPORTED_OPA_VERSIONS, archive_name, read_archive
from opa_format._trust import (
    DEFAULT_TRUST_DIR,
    TrustedCertificate,
    TrustStore,
    fingerprint,
    trust_add,
    trust_list,
    trust_remove,
)
from opa_format._writer import EXTENSIONS_PREFIX, write_archive

__all__ = [
    "DEFAULT_TRUST_DIR",
    "EXTENSIONS_PREFIX",
    "RESERVED_VARIABLES",
    "SUPPORTED_OPA_VERSIONS",
    "Archive",
    "ArchiveLimits",
    "ContentBlock",
    "ContextMessage",
    "Entry",
    "ExecutionMode",
    "History",
    "HistoryMessage",
    "Manifest",
    "SignatureStatus",
    "Signer",
    "SigningKey",
    "TemplateVariables",
    "TrustStore",
    "TrustedCertificate",
    "archive_name",
    "check_unsigned_allowed",
    "context_of",
    "extract",
    "fingerprint",
    "objective_of",
    "read_archive",
    "render_prompt",
    "trust_add",
    "trust_list",
    "trust_remove",
    "write_archive",
]
