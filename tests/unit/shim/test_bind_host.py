"""Where the shim may listen in plain HTTP: loopback only, unless told (``--insecure-http``)."""

from __future__ import annotations

import pytest

from shim.cli import build_parser
from shim.settings import DEFAULT_HOST, is_loopback, plain_http_refusal


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.8.9.10", True),
        ("::1", True),
        ("[::1]", True),
        ("localhost", True),
        ("LocalHost.", True),
        ("0.0.0.0", False),
        ("::", False),
        ("10.1.2.3", False),
        ("192.168.0.7", False),
        ("fe80::1", False),
        ("gatehouse.example.com", False),  # a name is not looked up
        ("", False),
    ],
)
def test_loopback(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def test_plain_http_is_refused_off_loopback_only() -> None:
    assert plain_http_refusal(DEFAULT_HOST, tls=False, insecure_http=False) is None
    assert plain_http_refusal("::1", tls=False, insecure_http=False) is None
    refusal = plain_http_refusal("0.0.0.0", tls=False, insecure_http=False)
    assert refusal is not None
    assert "refusing to serve plain HTTP on 0.0.0.0" in refusal
    assert "--tls-cert" in refusal and "--insecure-http" in refusal


def test_tls_or_the_override_allow_any_host() -> None:
    for host in ("0.0.0.0", "::", "10.1.2.3", "gatehouse.example.com"):
        assert plain_http_refusal(host, tls=True, insecure_http=False) is None
        assert plain_http_refusal(host, tls=False, insecure_http=True) is None


@pytest.mark.parametrize("command", ["up", "shim"])
def test_up_and_shim_take_host_and_insecure_http(command: str) -> None:
    args = build_parser().parse_args([command])
    assert args.host == DEFAULT_HOST and args.insecure_http is False
    args = build_parser().parse_args([command, "--host", "0.0.0.0", "--insecure-http"])
    assert args.host == "0.0.0.0" and args.insecure_http is True
