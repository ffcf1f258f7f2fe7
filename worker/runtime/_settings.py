"""The worker's typed settings, read once from the environment at start."""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass, field
from pathlib import Path

from contracts import APP_VERSION, ErrorCode, GatehouseError, NotifyConfig
from ledger import (
    PgTimeouts,
    Telemetry,
    resolve_database_url,
    resolve_pg_timeouts,
    resolve_telemetry,
)
from ledger.anchors import DEFAULT_ANCHOR_FILE
from ledger.signing import SigningError, load_signing_key
from ledger.signing import SigningKey as EvidenceKey
from opa_format import DEFAULT_TRUST_DIR, SigningKey
from worker.notify.config import load_config

__all__ = [
    "DEFAULT_OPENCODE_DIR",
    "WorkerSettings",
    "anchor_file",
    "default_share",
    "evidence_key",
    "notifications",
    "notifications_file",
    "opencode_dir",
]


# The repository's vendor/opencode (the worker runs from an editable install).
DEFAULT_OPENCODE_DIR = Path(__file__).resolve().parents[2] / "vendor" / "opencode"
# Where a worker keeps its files unless told (``gatehouse up`` tells it: under --var).
DEFAULT_WORKSPACE_ROOT = "var/workspaces"
DEFAULT_OPENCODE_STATE = "var/opencode"


@dataclass(frozen=True)
class WorkerSettings:
    database_url: str
    executor_id: str
    app_version: str
    workspace_root: Path
    model_base_url: str | None
    model_name: str
    model_api_key: str | None
    worker_concurrency: int
    # How many of its slots one queue partition (one submitter's work) may hold at once.
    worker_share: int
    queue_poll_s: float  # how often this worker looks for queued work it was not told of
    # SQLite only (PostgreSQL wakes waits by LISTEN/NOTIFY): how often a waiting
    # run looks for the message that wakes it (an approval, a cancel, a reply).
    wake_poll_s: float
    heartbeat_s: float  # how often this worker says it is alive (and the reaper looks)
    dead_after_s: float  # a worker silent this long is dead: its runs are handed over
    crash_point: str | None  # test hook: see worker/runtime/_crash.py
    random_seed: str | None  # RANDOM_SEED: every random choice of a run is drawn from it
    opencode_dir: Path  # the pinned OpenCode install (vendor/opencode)
    opencode_state: Path  # each worker's OpenCode HOME is <opencode_state>/<executor_id>
    opencode_model_url: str | None  # the OpenAI-compatible model OpenCode talks to
    opencode_model: str
    # The trust store a run's archive is checked against again (as the shim's).
    opa_trust_dir: Path = Path(DEFAULT_TRUST_DIR)
    opa_signing_key: SigningKey | None = None  # signs output archives when set
    # GATEHOUSE_NOTIFICATIONS: who is told about run events (worker/notify); None: nobody.
    notifications: NotifyConfig | None = None
    # OpenTelemetry traces through DBOS (dbos-config.yaml's telemetry; GATEHOUSE_OTLP*)
    telemetry: Telemetry = field(default_factory=Telemetry)
    # GATEHOUSE_SIGNING_KEY: signs each run's chain checkpoint (None: written unsigned)
    signing_key: EvidenceKey | None = None
    # GATEHOUSE_ANCHOR_FILE: where each run's checkpoint is appended, outside the database
    anchor_file: Path = Path(DEFAULT_ANCHOR_FILE)
    # GATEHOUSE_PG_*: how long a PostgreSQL connection may go unanswered (ledger._net).
    pg_timeouts: PgTimeouts = field(default_factory=PgTimeouts)

    def planners(self) -> tuple[str, ...]:
        """The recipe planners this worker can run (its heartbeat says so): a template
        always; a model with GATEHOUSE_MODEL_BASE_URL; OpenCode once it is installed
        and has a model to talk to."""
        have = ["template"]
        if self.model_base_url is not None:
            have.append("model")
        installed = (self.opencode_dir / "node_modules" / ".bin" / "opencode").exists()
        if installed and self.opencode_model_url is not None:
            have.append("opencode")
        return tuple(have)

    @property
    def snapshot_root(self) -> Path:
        """Where pre-turn workspace snapshots are kept (beside the workspaces, not in one)."""
        return self.workspace_root / ".gatehouse-snapshots"

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> WorkerSettings:
        e = dict(os.environ) if env is None else env
        url = resolve_database_url(e)[0]
        concurrency = max(1, _count(e, "GATEHOUSE_WORKER_CONCURRENCY", 16))
        share = _count(e, "GATEHOUSE_WORKER_SHARE", default_share(concurrency))
        if not 1 <= share <= concurrency:
            raise GatehouseError(
                ErrorCode.INVALID_REQUEST,
                f"GATEHOUSE_WORKER_SHARE must be from 1 to GATEHOUSE_WORKER_CONCURRENCY"
                f" ({concurrency}); it is {share}",
            )
        # Workers are told of new work (worker.durable's wake: PostgreSQL NOTIFY, on
        # SQLite a datagram within the host), and each heartbeat looks whether any
        # waits: this pass at every partition, whatever the queue holds, is the last resort.
        queue_poll = _seconds(e, "GATEHOUSE_QUEUE_POLL_S", "30")
        wake_poll = _seconds(e, "GATEHOUSE_WAKE_POLL_S", "0.05")
        heartbeat = _seconds(e, "GATEHOUSE_HEARTBEAT_S", "1")
        dead_after = _seconds(e, "GATEHOUSE_DEAD_AFTER_S", "6")
        if dead_after < 3 * heartbeat:
            raise GatehouseError(
                ErrorCode.INVALID_REQUEST,
                "GATEHOUSE_DEAD_AFTER_S must be at least three heartbeats (GATEHOUSE_HEARTBEAT_S)",
            )
        return cls(
            database_url=url,
            executor_id=e.get("GATEHOUSE_EXECUTOR_ID", f"worker-{socket.gethostname()}"),
            app_version=e.get("GATEHOUSE_APP_VERSION", APP_VERSION),
            workspace_root=Path(
                e.get("GATEHOUSE_WORKSPACE_ROOT", DEFAULT_WORKSPACE_ROOT)
            ).resolve(),
            model_base_url=e.get("GATEHOUSE_MODEL_BASE_URL") or None,
            model_name=e.get("GATEHOUSE_MODEL_NAME", "planner"),
            model_api_key=e.get("GATEHOUSE_MODEL_API_KEY") or None,
            worker_concurrency=concurrency,
            worker_share=share,
            queue_poll_s=min(60.0, max(0.01, queue_poll)),
            wake_poll_s=min(5.0, max(0.005, wake_poll)),
            heartbeat_s=heartbeat,
            dead_after_s=dead_after,
            crash_point=e.get("GATEHOUSE_CRASH_POINT") or None,
            random_seed=e.get("RANDOM_SEED") or None,
            opencode_dir=opencode_dir(e),
            opencode_state=Path(
                e.get("GATEHOUSE_OPENCODE_STATE", DEFAULT_OPENCODE_STATE)
            ).resolve(),
            opencode_model_url=e.get("GATEHOUSE_OPENCODE_MODEL_URL")
            or e.get("GATEHOUSE_MODEL_BASE_URL")
            or None,
            opencode_model=e.get("GATEHOUSE_OPENCODE_MODEL")
            or e.get("GATEHOUSE_MODEL_NAME", "planner"),
            opa_trust_dir=Path(e.get("GATEHOUSE_OPA_TRUST_DIR") or DEFAULT_TRUST_DIR),
            opa_signing_key=_signing_key(e),
            notifications=notifications(e),
            telemetry=resolve_telemetry(e),
            signing_key=evidence_key(e),
            anchor_file=anchor_file(e),
            pg_timeouts=resolve_pg_timeouts(e),
        )


def notifications_file(env: dict[str, str]) -> Path | None:
    """GATEHOUSE_NOTIFICATIONS: the notifications file; None when unset."""
    path = env.get("GATEHOUSE_NOTIFICATIONS")
    return Path(path) if path else None


def notifications(env: dict[str, str]) -> NotifyConfig | None:
    """The notifications file, read at start: a bad one stops the worker with its reason."""
    path = notifications_file(env)
    return None if path is None else load_config(path)


def opencode_dir(env: dict[str, str]) -> Path:
    """GATEHOUSE_OPENCODE_DIR: the pinned OpenCode install (default vendor/opencode)."""
    return Path(env.get("GATEHOUSE_OPENCODE_DIR") or DEFAULT_OPENCODE_DIR).resolve()


def anchor_file(env: dict[str, str]) -> Path:
    """GATEHOUSE_ANCHOR_FILE: where chain checkpoints are appended."""
    return Path(env.get("GATEHOUSE_ANCHOR_FILE") or DEFAULT_ANCHOR_FILE).resolve()


def default_share(concurrency: int) -> int:
    """One submitter's share of a worker's slots unless told: all but a quarter,
    which stay free for everyone else's work (all of them below 4 slots)."""
    return concurrency - concurrency // 4


def _count(env: dict[str, str], name: str, default: int) -> int:
    try:
        return int(env.get(name, str(default)))
    except ValueError as exc:
        raise GatehouseError(ErrorCode.INVALID_REQUEST, f"{name} must be an integer") from exc


def _seconds(env: dict[str, str], name: str, default: str) -> float:
    try:
        value = float(env.get(name, default))
    except ValueError as exc:
        raise GatehouseError(
            ErrorCode.INVALID_REQUEST, f"{name} must be a number of seconds"
        ) from exc
    if value <= 0:
        raise GatehouseError(ErrorCode.INVALID_REQUEST, f"{name} must be more than 0")
    return value


def _signing_key(env: dict[str, str]) -> SigningKey | None:
    """GATEHOUSE_OPA_SIGNING_KEY and _CERT: PEM files; both or neither."""
    key, cert = env.get("GATEHOUSE_OPA_SIGNING_KEY"), env.get("GATEHOUSE_OPA_SIGNING_CERT")
    if not key and not cert:
        return None
    if not key or not cert:
        raise GatehouseError(
            ErrorCode.INVALID_REQUEST,
            "set both GATEHOUSE_OPA_SIGNING_KEY and GATEHOUSE_OPA_SIGNING_CERT, or neither",
        )
    try:
        return SigningKey.from_pem(Path(key).read_bytes(), Path(cert).read_bytes())
    except (OSError, ValueError) as exc:
        raise GatehouseError(
            ErrorCode.INVALID_REQUEST, f"the OPA signing key or certificate is unusable: {exc}"
        ) from exc


def evidence_key(env: dict[str, str]) -> EvidenceKey | None:
    """GATEHOUSE_SIGNING_KEY: the deployment's Ed25519 or ECDSA P-256 private key (PEM
    file) that signs chain checkpoints; unset: checkpoints are written unsigned."""
    path = env.get("GATEHOUSE_SIGNING_KEY")
    if not path:
        return None
    try:
        return load_signing_key(Path(path).read_bytes(), f"GATEHOUSE_SIGNING_KEY ({path})")
    except (OSError, SigningError) as exc:
        raise GatehouseError(
            ErrorCode.INVALID_REQUEST, f"the evidence signing key is unusable: {exc}"
        ) from exc
