"""Tracing settings: dbos-config.yaml's telemetry section and the environment."""

from __future__ import annotations

from pathlib import Path

import pytest

from contracts import GatehouseError
from ledger import resolve_telemetry


def test_tracing_settings_come_from_the_config_file_and_the_environment(tmp_path: Path) -> None:
    assert resolve_telemetry({}, tmp_path).enabled is False  # no file: off
    (tmp_path / "dbos-config.yaml").write_text(
        "name: gatehouse\ntelemetry:\n  OTLPExporter:\n"
        "    tracesEndpoint: ${EP}\n  otlp_attributes: {team: infra}\n"
    )
    off = resolve_telemetry({}, tmp_path)
    assert (off.enabled, off.traces_endpoints, off.attributes) == (False, (), {"team": "infra"})
    on = resolve_telemetry({"EP": "http://c:4318/v1/traces"}, tmp_path)
    assert (on.enabled, on.traces_endpoints) == (True, ("http://c:4318/v1/traces",))
    env = {"GATEHOUSE_OTLP_TRACES_ENDPOINT": "http://a/v1/traces, http://b/v1/traces"}
    assert resolve_telemetry(env, tmp_path).traces_endpoints == (
        "http://a/v1/traces", "http://b/v1/traces",
    )  # fmt: skip
    assert resolve_telemetry({**env, "GATEHOUSE_OTLP": "off"}, tmp_path).enabled is False
    assert resolve_telemetry({"GATEHOUSE_OTLP": "on"}, tmp_path).enabled is True
    (tmp_path / "dbos-config.yaml").write_text(
        "name: gatehouse\ntelemetry:\n  disable_otlp: false\n"
    )
    assert resolve_telemetry({}, tmp_path).enabled is True
    with pytest.raises(GatehouseError, match="not an http"):
        resolve_telemetry({"GATEHOUSE_OTLP_TRACES_ENDPOINT": "collector:4318"}, tmp_path)
    with pytest.raises(GatehouseError, match="on or off"):
        resolve_telemetry({"GATEHOUSE_OTLP": "maybe"}, tmp_path)
