"""``dbos-config.yaml``: where Gatehouse and the DBOS tools find the database.

The file in the working folder is read the way the DBOS CLI reads it: YAML,
``${VAR}`` replaced by the variable's value (empty when unset), the database in
``system_database_url``. Gatehouse honours it only when its ``name`` is
``gatehouse`` (another DBOS application's file is not ours to follow).

Which URL a process uses, first found wins:

1. ``--database-url`` (commands that take it);
2. ``GATEHOUSE_DATABASE_URL``, when set and not empty;
3. ``system_database_url`` in ``./dbos-config.yaml``, when not empty;
4. ``sqlite:///gatehouse.sqlite``, the same file the DBOS CLI falls back to for an
   application named ``gatehouse``, so ``dbos workflow list`` finds it unaided.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from contracts import ErrorCode, GatehouseError

__all__ = [
    "APP_NAME",
    "CONFIG_FILE",
    "DEFAULT_DATABASE_URL",
    "Telemetry",
    "Tls",
    "resolve_database_url",
    "resolve_telemetry",
    "resolve_tls",
]

APP_NAME = "gatehouse"
CONFIG_FILE = "dbos-config.yaml"
# The embedded default: one SQLite file, for one machine (what DBOS's CLI assumes too).
DEFAULT_DATABASE_URL = f"sqlite:///{APP_NAME}.sqlite"
_VAR = re.compile(r"\$\{([^}]+)\}")


def _load(path: Path, env: Mapping[str, str]) -> dict[str, object] | None:
    """The file's settings, or None (no file, or another application's)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise GatehouseError(ErrorCode.CONFIG_INVALID, f"{path}: {exc.strerror}") from exc
    try:
        data = yaml.safe_load(_VAR.sub(lambda m: env.get(m.group(1), ""), text))
    except yaml.YAMLError as exc:
        raise GatehouseError(ErrorCode.CONFIG_INVALID, f"{path} is not YAML: {exc}") from exc
    if not isinstance(data, dict) or data.get("name") != APP_NAME:
        return None
    return {str(k): v for k, v in data.items()}


def _configured(path: Path, env: Mapping[str, str]) -> str | None:
    """``system_database_url`` from the file, or None (no file, not Gatehouse's, empty)."""
    data = _load(path, env)
    if data is None:
        return None
    url = data.get("system_database_url")
    if url is not None and not isinstance(url, str):
        raise GatehouseError(
            ErrorCode.CONFIG_INVALID, f"{path}: system_database_url must be a string"
        )
    return (url or "").strip() or None


def resolve_database_url(
    env: Mapping[str, str] | None = None, folder: Path | None = None
) -> tuple[str, str]:
    """(database URL, where it came from) by the order in this module's docstring,
    from ``GATEHOUSE_DATABASE_URL`` on (a flag, when given, is the caller's to prefer)."""
    e = os.environ if env is None else env
    if e.get("GATEHOUSE_DATABASE_URL", "").strip():
        return e["GATEHOUSE_DATABASE_URL"].strip(), "GATEHOUSE_DATABASE_URL"
    path = (folder or Path.cwd()) / CONFIG_FILE
    configured = _configured(path, e)
    if configured is not None:
        return configured, str(path)
    return DEFAULT_DATABASE_URL, "the default database URL"


@dataclass(frozen=True)
class Telemetry:
    """OpenTelemetry traces through DBOS (``telemetry`` in ``dbos-config.yaml``)."""

    enabled: bool = False
    traces_endpoints: tuple[str, ...] = ()
    attributes: dict[str, str] = field(default_factory=dict)


def _endpoints(value: object, where: str) -> tuple[str, ...]:
    items = value.split(",") if isinstance(value, str) else value if value is not None else []
    if not isinstance(items, list) or not all(isinstance(i, str) for i in items):
        raise GatehouseError(
            ErrorCode.CONFIG_INVALID, f"{where}: traces endpoints must be URLs (a list or a string)"
        )
    found = tuple(i.strip() for i in items if isinstance(i, str) and i.strip())
    for url in found:
        if not url.startswith(("http://", "https://")):
            raise GatehouseError(
                ErrorCode.CONFIG_INVALID, f"{where}: {url!r} is not an http(s) OTLP endpoint"
            )
    return found


def resolve_telemetry(
    env: Mapping[str, str] | None = None, folder: Path | None = None
) -> Telemetry:
    """Tracing settings, in DBOS's spelling: ``telemetry.OTLPExporter.tracesEndpoint``
    (a list or a comma-separated string), ``telemetry.disable_otlp``,
    ``telemetry.otlp_attributes``. ``GATEHOUSE_OTLP_TRACES_ENDPOINT`` (comma-separated)
    and ``GATEHOUSE_OTLP`` (``on`` / ``off``) override the file. Tracing is on when an
    endpoint is named, or when it is switched on without one (spans then go to the
    tracer provider the process installed, as a test or an embedding program does)."""
    e = os.environ if env is None else env
    path = (folder or Path.cwd()) / CONFIG_FILE
    data = _load(path, e) or {}
    section = data.get("telemetry") or {}
    if not isinstance(section, dict):
        raise GatehouseError(ErrorCode.CONFIG_INVALID, f"{path}: telemetry must be a mapping")
    exporter = section.get("OTLPExporter") or {}
    if not isinstance(exporter, dict):
        raise GatehouseError(ErrorCode.CONFIG_INVALID, f"{path}: OTLPExporter must be a mapping")
    endpoints = _endpoints(exporter.get("tracesEndpoint"), str(path))
    if e.get("GATEHOUSE_OTLP_TRACES_ENDPOINT", "").strip():
        endpoints = _endpoints(
            e["GATEHOUSE_OTLP_TRACES_ENDPOINT"], "GATEHOUSE_OTLP_TRACES_ENDPOINT"
        )
    attributes = section.get("otlp_attributes") or {}
    if not isinstance(attributes, dict):
        raise GatehouseError(ErrorCode.CONFIG_INVALID, f"{path}: otlp_attributes must be a mapping")
    switch = e.get("GATEHOUSE_OTLP", "").strip().lower()
    if switch not in ("", "on", "off"):
        raise GatehouseError(ErrorCode.CONFIG_INVALID, "GATEHOUSE_OTLP must be on or off")
    disabled = section.get("disable_otlp")
    enabled = switch == "on" if switch else bool(endpoints) or disabled is False
    return Telemetry(enabled, endpoints, {str(k): str(v) for k, v in attributes.items()})


@dataclass(frozen=True)
class Tls:
    """The shim's certificate (PEM, then any intermediates) and its private key (PEM)."""

    cert: Path
    key: Path


def _pair(cert: object, key: object, where: str) -> tuple[str, str] | None:
    """(cert, key) when the source names both, None when neither; else CONFIG_INVALID."""
    named = [str(v).strip() if v is not None else "" for v in (cert, key)]
    if not any(named):
        return None
    if not all(named):
        raise GatehouseError(
            ErrorCode.CONFIG_INVALID, f"{where}: give the TLS certificate and key together"
        )
    return named[0], named[1]


def resolve_tls(
    cert: str | None = None,
    key: str | None = None,
    env: Mapping[str, str] | None = None,
    folder: Path | None = None,
) -> Tls | None:
    """HTTPS for the shim, first found wins (each source names both files or neither):
    ``cert``/``key`` (``--tls-cert``/``--tls-key``), ``GATEHOUSE_TLS_CERT`` /
    ``GATEHOUSE_TLS_KEY``, ``tls.cert``/``tls.key`` in ``dbos-config.yaml`` (relative to
    its folder). None: plain HTTP. A file that cannot be read is CONFIG_INVALID."""
    e = os.environ if env is None else env
    base = folder or Path.cwd()
    found = _pair(cert, key, "--tls-cert and --tls-key")
    if found is None:
        found = _pair(
            e.get("GATEHOUSE_TLS_CERT"),
            e.get("GATEHOUSE_TLS_KEY"),
            "GATEHOUSE_TLS_CERT and GATEHOUSE_TLS_KEY",
        )
    if found is None:
        path = base / CONFIG_FILE
        section = (_load(path, e) or {}).get("tls") or {}
        if not isinstance(section, dict):
            raise GatehouseError(ErrorCode.CONFIG_INVALID, f"{path}: tls must be a mapping")
        found = _pair(section.get("cert"), section.get("key"), f"{path}: tls")
    if found is None:
        return None
    tls = Tls(*(base / Path(p).expanduser() for p in found))
    for what, file in (("certificate", tls.cert), ("key", tls.key)):
        try:
            with file.open("rb"):
                pass
        except OSError as exc:
            raise GatehouseError(
                ErrorCode.CONFIG_INVALID,
                f"the TLS {what} {file} cannot be read: {exc.strerror or exc}",
            ) from exc
    return tls
