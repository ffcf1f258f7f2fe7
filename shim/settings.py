"""The shim's typed settings, read once from the environment at start."""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from contracts import APP_VERSION, ErrorCode, GatehouseError
from ledger import PgTimeouts, anchors, resolve_database_url, resolve_pg_timeouts
from opa_format import DEFAULT_TRUST_DIR

__all__ = [
    "DEFAULT_HEADER_TIMEOUT_S",
    "DEFAULT_HOST",
    "H11_MAX_HEAD_BYTES",
    "Proxies",
    "Rate",
    "ShimSettings",
    "is_loopback",
    "parse_proxies",
    "parse_rate",
    "plain_http_refusal",
    "read_header_timeout",
]


# uvicorn (h11) refuses a request head (request line and headers) larger than this
# with its own 400 before the app sees it; the door's header limits answer 431 below it.
# Whoever serves the shim passes it (shim.local starts uvicorn with it).
H11_MAX_HEAD_BYTES = 32 * 1024

# A connection whose request head (request line and headers) is not all there this
# long after it opened, or after its previous answer ended, is closed: a client that
# sends its headers a byte at a time must not hold a connection, and with it a file
# descriptor, for as long as it likes. Read by the server's protocol (shim.api.serving).
DEFAULT_HEADER_TIMEOUT_S = 10.0


# Where the shim listens unless told (--host): this machine only.
DEFAULT_HOST = "127.0.0.1"


def is_loopback(host: str) -> bool:
    """Whether only this machine can reach ``host``: ``localhost`` or a loopback address
    (127.0.0.0/8, ::1). A wildcard (0.0.0.0, ::) or any other name or address is not;
    a name is not looked up (what it resolves to may change after the check)."""
    if host.strip().lower().rstrip(".") == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip().strip("[]")).is_loopback
    except ValueError:
        return False


def plain_http_refusal(host: str, *, tls: bool, insecure_http: bool) -> str | None:
    """Why the shim must not listen on ``host`` as asked, or None.

    Off loopback, bearer tokens and plans would cross the network in clear: HTTPS is
    required (a certificate and key) unless the person says plain HTTP is meant
    (``insecure_http``: ``--insecure-http``, for a shim behind a proxy or mesh that
    terminates TLS). A flag and not a variable on purpose: it shows on the command line
    of the process that serves in clear."""
    if tls or insecure_http or is_loopback(host):
        return None
    return (
        f"refusing to serve plain HTTP on {host}, an address other machines can reach:"
        " tokens would cross the network in clear. Give a certificate (--tls-cert and"
        " --tls-key, GATEHOUSE_TLS_CERT/GATEHOUSE_TLS_KEY, or tls: in dbos-config.yaml),"
        " or, behind a proxy that terminates TLS, pass --insecure-http"
    )


@dataclass(frozen=True)
class Rate:
    """A token bucket: ``per_s`` requests a second on average, ``burst`` at once."""

    per_s: float
    burst: int


def parse_rate(spec: str, key: str = "rate") -> Rate | None:
    """``RATE`` (burst: 5 x RATE), ``RATE:BURST`` (RATE may end in ``/s``), or ``0`` /
    ``off`` (no limit: None). RATE is requests a second (a decimal is fine)."""
    text = spec.strip().lower()
    if text in ("0", "off", "none"):
        return None
    rate_text, _, burst_text = text.partition(":")
    try:
        per_s = float(rate_text.removesuffix("/s").strip())
        burst = int(burst_text.strip()) if burst_text else max(1, int(min(per_s, 1e9) * 5))
    except ValueError as exc:
        raise GatehouseError(
            ErrorCode.CONFIG_INVALID, f"{key} must be RATE or RATE:BURST, or off (got {spec!r})"
        ) from exc
    if not (0 < per_s < float("inf")) or burst < 1:
        raise GatehouseError(
            ErrorCode.CONFIG_INVALID, f"{key}: the rate and the burst must be positive"
        )
    return Rate(per_s, burst)


# The proxies whose forwarded headers are believed: addresses and networks.
Proxies = tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]


def parse_proxies(spec: str, key: str = "GATEHOUSE_TRUSTED_PROXIES") -> Proxies:
    """Comma-separated addresses or networks (``10.0.0.5``, ``10.0.0.0/8``, ``::1``);
    empty: none (forwarded headers are ignored, whoever sends them)."""
    networks = []
    for part in spec.split(","):
        text = part.strip()
        if not text:
            continue
        try:
            networks.append(ipaddress.ip_network(text, strict=False))
        except ValueError as exc:
            raise GatehouseError(
                ErrorCode.CONFIG_INVALID,
                f"{key}: {text[:60]!r} is not an IP address or network (CIDR)",
            ) from exc
    return tuple(networks)


def read_header_timeout(env: Mapping[str, str]) -> float:
    """``GATEHOUSE_HEADER_TIMEOUT_S``: read by the settings and by the server's protocol,
    which runs before any app and has no settings object of its own."""
    return _seconds(dict(env), "GATEHOUSE_HEADER_TIMEOUT_S", DEFAULT_HEADER_TIMEOUT_S)


# Defaults no person or script in normal use comes near; limits are per shim process.
DEFAULT_RATE_PER_IDENTITY = "20:100"
DEFAULT_RATE_PER_ADDRESS = "50:200"


@dataclass(frozen=True)
class ShimSettings:
    database_url: str
    app_version: str
    max_body_bytes: int
    max_archive_bytes: int  # an OPA archive posted to /intent, enforced while reading
    tokens_file: Path | None
    opa_trust_dir: Path  # PEM certificates signed OPA archives are verified against
    # A worker silent this long is not live (readiness, gatehouse workers); the
    # workers' own reaper uses the same variable to declare one dead.
    dead_after_s: float = 6.0
    # The anchor file the workers append run checkpoints to (ledger verify reads it).
    anchor_file: Path = Path(anchors.DEFAULT_ANCHOR_FILE)
    # Token buckets at the door (None: no limit), per identity and per client address.
    rate_per_identity: Rate | None = Rate(20.0, 100)  # DEFAULT_RATE_PER_IDENTITY
    rate_per_address: Rate | None = Rate(50.0, 200)  # DEFAULT_RATE_PER_ADDRESS
    # A refused request repeating within this many seconds of its row's first one is
    # counted on that row (repeat_count) instead of adding a row.
    event_window_s: float = 60.0
    # Intents accepted while this many runs are queued are refused (503 overloaded),
    # and one submitter may have at most max_queued_per_submitter of them (429).
    max_queued: int = 1000
    max_queued_per_submitter: int = 200
    # GATEHOUSE_PG_*: how long a PostgreSQL connection may go unanswered (ledger._net).
    pg_timeouts: PgTimeouts = field(default_factory=PgTimeouts)
    # GATEHOUSE_SLACK: the Slack file; set, the shim takes decisions from Slack buttons.
    slack_file: Path | None = None
    # GATEHOUSE_OIDC: the OIDC file; set, people sign in to the dashboard with the IdP.
    oidc_file: Path | None = None
    # GATEHOUSE_TRUSTED_PROXIES: the peers whose X-Forwarded-For and X-Forwarded-Proto
    # are believed (shim.api.edge); none by default, so a forged header changes nothing.
    trusted_proxies: Proxies = ()
    # GATEHOUSE_HEADER_TIMEOUT_S: how long a request head may take to arrive.
    header_timeout_s: float = DEFAULT_HEADER_TIMEOUT_S
    # GATEHOUSE_MAX_EVENT_STREAMS: event streams one identity may hold open at once.
    max_event_streams: int = 20

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> ShimSettings:
        e = dict(os.environ) if env is None else env
        max_body = _positive_int(e, "GATEHOUSE_MAX_BODY_BYTES", 1024 * 1024)
        max_archive = _positive_int(e, "GATEHOUSE_MAX_ARCHIVE_BYTES", 32 * 1024 * 1024)
        return cls(
            database_url=resolve_database_url(e)[0],
            app_version=e.get("GATEHOUSE_APP_VERSION", APP_VERSION),
            max_body_bytes=max_body,
            max_archive_bytes=max_archive,
            opa_trust_dir=Path(e.get("GATEHOUSE_OPA_TRUST_DIR") or DEFAULT_TRUST_DIR),
            dead_after_s=_seconds(e, "GATEHOUSE_DEAD_AFTER_S", 6.0),
            anchor_file=Path(e.get("GATEHOUSE_ANCHOR_FILE") or anchors.DEFAULT_ANCHOR_FILE),
            rate_per_identity=parse_rate(
                e.get("GATEHOUSE_RATE_PER_IDENTITY") or DEFAULT_RATE_PER_IDENTITY,
                "GATEHOUSE_RATE_PER_IDENTITY",
            ),
            rate_per_address=parse_rate(
                e.get("GATEHOUSE_RATE_PER_ADDRESS") or DEFAULT_RATE_PER_ADDRESS,
                "GATEHOUSE_RATE_PER_ADDRESS",
            ),
            event_window_s=_seconds(e, "GATEHOUSE_SECURITY_EVENT_WINDOW_S", 60.0),
            max_queued=_positive_int(e, "GATEHOUSE_MAX_QUEUED", 1000),
            max_queued_per_submitter=_positive_int(e, "GATEHOUSE_MAX_QUEUED_PER_SUBMITTER", 200),
            pg_timeouts=resolve_pg_timeouts(e),
            tokens_file=Path(e["GATEHOUSE_TOKENS_FILE"])
            if e.get("GATEHOUSE_TOKENS_FILE")
            else None,
            slack_file=Path(e["GATEHOUSE_SLACK"]) if e.get("GATEHOUSE_SLACK") else None,
            oidc_file=Path(e["GATEHOUSE_OIDC"]) if e.get("GATEHOUSE_OIDC") else None,
            trusted_proxies=parse_proxies(e.get("GATEHOUSE_TRUSTED_PROXIES", "")),
            header_timeout_s=read_header_timeout(e),
            max_event_streams=_positive_int(e, "GATEHOUSE_MAX_EVENT_STREAMS", 20),
        )


def _positive_int(env: dict[str, str], key: str, default: int) -> int:
    """A positive whole number: a size in bytes, a count."""
    try:
        value = int(env.get(key, str(default)))
    except ValueError as exc:
        raise GatehouseError(ErrorCode.INVALID_REQUEST, f"{key} must be an integer") from exc
    if value <= 0:
        raise GatehouseError(ErrorCode.INVALID_REQUEST, f"{key} must be positive")
    return value


def _seconds(env: dict[str, str], key: str, default: float) -> float:
    try:
        value = float(env.get(key, str(default)))
    except ValueError as exc:
        raise GatehouseError(ErrorCode.INVALID_REQUEST, f"{key} must be a number") from exc
    if value <= 0:
        raise GatehouseError(ErrorCode.INVALID_REQUEST, f"{key} must be positive")
    return value
