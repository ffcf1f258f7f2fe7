"""HTTPS: a shim served with a certificate answers over TLS only, and the client
commands trust a self-signed certificate they are given (``--ca`` / ``GATEHOUSE_CA``)."""

from __future__ import annotations

import ssl
from pathlib import Path

import httpx
import pytest

from contracts import GatehouseError
from ledger import Tls, resolve_tls
from shim.cli import build_parser
from shim.cli.client import Client
from tests.support.served import ServedShim
from tests.support.stack import Stack
from tests.support.tls import self_signed


def test_https_round_trip(stack: Stack, tmp_path: Path) -> None:
    tls = self_signed(tmp_path)
    token = stack.client.people.tokens["olga"]
    with ServedShim(stack.database_url, stack.client.people.file, tls=tls) as url:
        assert url.startswith("https://")
        with httpx.Client(
            base_url=url, verify=ssl.create_default_context(cafile=str(tls.cert)), trust_env=False
        ) as http:
            assert http.get("/healthz").json() == {"status": "ok", "database": "ok"}
            r = http.get("/runs", headers={"Authorization": f"Bearer {token}"})
            assert r.status_code == 200, r.text
            assert http.get("/runs").status_code == 401
        # the CLI's client, trusting the certificate it is given
        api = Client(url, token, ca=str(tls.cert))
        try:
            assert api.runs().runs is not None
        finally:
            api.close()
        # and without it: the certificate is not trusted
        untrusting = Client(url, token)
        try:
            with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
                untrusting.runs()
        finally:
            untrusting.close()
        # plain HTTP to the TLS port gets no answer
        with pytest.raises(httpx.TransportError):
            httpx.get(url.replace("https://", "http://") + "/healthz", trust_env=False, timeout=5)


def test_the_client_commands_take_ca(monkeypatch: pytest.MonkeyPatch) -> None:
    args = build_parser().parse_args(["runs", "--ca", "my.pem"])
    assert args.ca == "my.pem"
    args = build_parser().parse_args(["opa", "output", "run_" + "0" * 32, "--ca", "my.pem"])
    assert args.ca == "my.pem"
    monkeypatch.setenv("GATEHOUSE_CA", "env.pem")
    assert build_parser().parse_args(["runs"]).ca == "env.pem"


def test_tls_settings_precedence(tmp_path: Path) -> None:
    """--tls-cert/--tls-key, then GATEHOUSE_TLS_CERT/_KEY, then tls: in dbos-config.yaml."""
    for name in ("flag", "env", "file"):
        for ext in ("pem", "key"):
            (tmp_path / f"{name}.{ext}").write_text("x")
    (tmp_path / "dbos-config.yaml").write_text(
        "name: gatehouse\ntls:\n  cert: file.pem\n  key: file.key\n"
    )
    env = {"GATEHOUSE_TLS_CERT": str(tmp_path / "env.pem"), "GATEHOUSE_TLS_KEY": "env.key"}
    flags = (str(tmp_path / "flag.pem"), str(tmp_path / "flag.key"))
    assert resolve_tls(*flags, env=env, folder=tmp_path) == Tls(
        tmp_path / "flag.pem", tmp_path / "flag.key"
    )
    assert resolve_tls(env=env, folder=tmp_path) == Tls(tmp_path / "env.pem", tmp_path / "env.key")
    assert resolve_tls(env={}, folder=tmp_path) == Tls(tmp_path / "file.pem", tmp_path / "file.key")
    (tmp_path / "dbos-config.yaml").write_text("name: gatehouse\n")
    assert resolve_tls(env={}, folder=tmp_path) is None
    with pytest.raises(GatehouseError, match="together"):
        resolve_tls(flags[0], None, env={}, folder=tmp_path)
    with pytest.raises(GatehouseError, match="cannot be read"):
        resolve_tls("missing.pem", "missing.key", env={}, folder=tmp_path)
