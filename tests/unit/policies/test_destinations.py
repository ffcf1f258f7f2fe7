"""Unit tests for policies.destinations: URL matching and resolved-address checks."""

from __future__ import annotations

import ipaddress

import pytest

from contracts import Connector, Destination, DriverKind, ErrorCode, GatehouseError
from policies.destinations import address_allowed, match_destination


def _connector(*destinations: Destination) -> Connector:
    return Connector(
        connector_id="web",
        driver_kind=DriverKind.HTTP,
        description="test connector",
        destinations=list(destinations),
    )


API = Destination(scheme="https", host="api.example.com", ports=[443], path_prefix="/v1")
ANY_PORT = Destination(scheme="http", host="Files.Example.com")
LOCAL = Destination(scheme="http", host="127.0.0.1", ports=[8080], allow_private=True)
LOCAL_STRICT = Destination(scheme="http", host="127.0.0.1", ports=[8080])
V6 = Destination(scheme="http", host="[2001:4860::1]", ports=[80])
CONNECTOR = _connector(API, ANY_PORT, LOCAL, V6)


def _refused(url: str, connector: Connector = CONNECTOR) -> GatehouseError:
    with pytest.raises(GatehouseError) as info:
        match_destination(url, connector)
    assert info.value.code is ErrorCode.DESTINATION_NOT_ALLOWED
    return info.value


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("https://api.example.com/v1", API),
        ("https://api.example.com/v1/items?x=1#frag", API),
        ("https://API.Example.COM:443/v1/items", API),
        ("http://files.example.com/a/b", ANY_PORT),
        ("http://files.example.com:9999/", ANY_PORT),
        ("http://files.example.com", ANY_PORT),
        ("http://127.0.0.1:8080/x", LOCAL),
        ("http://[2001:4860::1]/x", V6),
        ("https://api.example.com/v1/a..b/file.txt", API),
    ],
)
def test_allowed_urls_return_their_destination(url: str, expected: Destination) -> None:
    assert match_destination(url, CONNECTOR) == expected


@pytest.mark.parametrize(
    "url",
    [
        "ftp://files.example.com/a",
        "file:///etc/passwd",
        "gopher://files.example.com/",
        "javascript:alert(1)",
    ],
)
def test_wrong_scheme_is_refused(url: str) -> None:
    _refused(url)


def test_scheme_must_match_the_entry() -> None:
    _refused("http://api.example.com/v1")  # entry is https only
    _refused("https://files.example.com/")  # entry is http only


@pytest.mark.parametrize(
    "url",
    [
        "http://user@files.example.com/",
        "http://user:pw@files.example.com/",
        "http://files.example.com@evil.example.net/",
        "https://api.example.com:443@evil.example.net/v1",
    ],
)
def test_userinfo_is_refused(url: str) -> None:
    error = _refused(url)
    assert "userinfo" in error.message


def test_missing_host_is_refused() -> None:
    _refused("http:///path")
    _refused("http://:8080/path")


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:8081/x",  # wrong port
        "http://127.0.0.1/x",  # default port 80 is not 8080
        "https://api.example.com:8443/v1",  # explicit non-default port
        "http://[2001:4860::1]:8080/x",
    ],
)
def test_wrong_port_is_refused(url: str) -> None:
    _refused(url)


def test_unparsable_port_is_refused() -> None:
    _refused("http://files.example.com:99999/")
    _refused("http://files.example.com:80:80/")


@pytest.mark.parametrize(
    "url",
    [
        "http://evil.example.net/",
        "http://files.example.com.evil.example.net/",
        "http://sub.files.example.com/",
        "http://files.example.com./",  # trailing dot is a different spelling
        "http://2130706433:8080/x",  # decimal 127.0.0.1 is not the host "127.0.0.1"
        "http://localhost:8080/x",
    ],
)
def test_host_must_match_exactly(url: str) -> None:
    _refused(url)


@pytest.mark.parametrize(
    "url",
    [
        "https://api.example.com/",
        "https://api.example.com/v2/items",
        "https://api.example.com/v1x",  # prefix matches whole segments only
        "https://api.example.com/V1",
    ],
)
def test_path_outside_prefix_is_refused(url: str) -> None:
    _refused(url)


@pytest.mark.parametrize(
    "url",
    [
        "https://api.example.com/v1/../admin",
        "https://api.example.com/v1/..",
        "https://api.example.com/v1/%2e%2e/admin",
        "https://api.example.com/v1/%2E%2E/admin",
        "https://api.example.com/v1/.%2e/admin",
        "https://api.example.com/v1/..%2fadmin",
        "https://api.example.com/v1/..\\admin",
    ],
)
def test_dot_dot_segments_are_refused(url: str) -> None:
    error = _refused(url)
    assert ".." in error.message


@pytest.mark.parametrize(
    "url",
    [
        "http://files.example.com/a b",
        "http://files.example.com/a\tb",
        "http://files.\nexample.com/",
        "http://files.example.com/\x00",
        " http://files.example.com/",
    ],
)
def test_whitespace_and_control_characters_are_refused(url: str) -> None:
    _refused(url)


def test_refusal_details_name_the_url() -> None:
    error = _refused("http://evil.example.net/")
    assert error.details["url"] == "http://evil.example.net/"
    assert error.details["host"] == "evil.example.net"


def test_connector_without_destinations_refuses_everything() -> None:
    _refused("http://files.example.com/", _connector())


# --- resolved addresses --------------------------------------------------

PUBLIC = Destination(scheme="https", host="api.example.com")
PRIVATE_OK = Destination(scheme="http", host="127.0.0.1", allow_private=True)


@pytest.mark.parametrize(
    "address",
    [
        "8.8.8.8",
        "1.1.1.1",
        "2606:4700:4700::1111",
        "2002:808:808::1",
        "64:ff9b::808:808",
        "::ffff:8.8.8.8",  # IPv4-mapped: the connection goes to 8.8.8.8
        "2001:0:4136:e378:8000:63bf:f7f7:f7f7",  # Teredo, server and client public
    ],
)
def test_public_addresses_are_allowed(address: str) -> None:
    assert address_allowed(ipaddress.ip_address(address), PUBLIC) is True


@pytest.mark.parametrize(
    "address",
    [
        "127.0.0.1",
        "127.1.2.3",
        "10.0.0.1",
        "172.16.0.1",
        "192.168.1.1",
        "169.254.169.254",  # cloud metadata
        "100.64.0.1",  # CGNAT: not is_private, not global either
        "100.127.255.254",
        "0.0.0.0",
        "255.255.255.255",
        "224.0.0.1",  # multicast reports is_global in Python 3.11
        "240.0.0.1",
        "198.18.0.1",
        "::1",
        "::",
        "fe80::1",
        "fc00::1",
        "fd12:3456::1",
        "fec0::1",  # site-local reports is_global in Python 3.11
        "ff02::1",
        "2001:db8::1",
        "::ffff:127.0.0.1",
        "::ffff:169.254.169.254",  # IPv4-mapped metadata address
        "64:ff9b::a9fe:a9fe",  # NAT64 of 169.254.169.254
        "64:ff9b::7f00:1",  # NAT64 of 127.0.0.1
        "64:ff9b:1::808:808",  # local-use NAT64 prefix
        "2002:a9fe:a9fe::1",  # 6to4 of 169.254.169.254
        "2002:7f00:1::1",  # 6to4 of 127.0.0.1
        "2001:0:4136:e378:8000:63bf:3fff:fdd2",  # Teredo
        "::7f00:1",  # IPv4-compatible 127.0.0.1
        "::808:808",  # IPv4-compatible, deprecated
    ],
)
def test_non_global_addresses_are_refused(address: str) -> None:
    ip = ipaddress.ip_address(address)
    assert address_allowed(ip, PUBLIC) is False
    assert address_allowed(ip, PRIVATE_OK) is True


def test_cgnat_is_not_private_but_still_refused() -> None:
    ip = ipaddress.ip_address("100.64.0.1")
    assert not ip.is_private
    assert address_allowed(ip, PUBLIC) is False


@pytest.mark.parametrize(
    "address",
    [
        "192.0.0.192",  # Oracle Cloud's older metadata address; global in Python 3.11.7
        "192.0.0.8",  # IPv4 dummy address; global in Python 3.11.7
        "192.0.0.255",
        "3fff::1",  # documentation (RFC 9637); global in Python 3.11
        "100:0:0:1::1",  # dummy prefix (RFC 9780)
        "5f00::1",  # SRv6 SIDs (RFC 9602)
        "ff0e::1",  # global-scope multicast
    ],
)
def test_blocks_is_global_lets_through_on_some_pythons_are_refused(address: str) -> None:
    assert address_allowed(ipaddress.ip_address(address), PUBLIC) is False


@pytest.mark.parametrize(
    "address",
    [
        "::ffff:192.0.0.192",
        "::ffff:100.64.0.1",  # IPv4-mapped CGNAT
        "::ffff:0:7f00:1",  # IPv4-translated (SIIT) 127.0.0.1
        "64:ff9b::c000:c0",  # NAT64 of 192.0.0.192
        "64:ff9b::a00:1",  # NAT64 of 10.0.0.1
        "2002:c000:c0::1",  # 6to4 of 192.0.0.192
        "2002:6440:1::1",  # 6to4 of 100.64.0.1
        "2001:0:4136:e378:8000:63bf:80ff:fffe",  # Teredo, public server, client 127.0.0.1
        "2001:0:4136:e378:0:0:5601:5356",  # Teredo, client 169.254.169.254
        "2001:0:7f00:1:8000:63bf:f7f7:f7f7",  # Teredo, server 127.0.0.1, client 8.8.8.8
        "::a9fe:a9fe",  # IPv4-compatible 169.254.169.254
    ],
)
def test_ipv6_is_judged_by_the_ipv4_address_it_embeds(address: str) -> None:
    ip = ipaddress.ip_address(address)
    assert address_allowed(ip, PUBLIC) is False
    assert address_allowed(ip, PRIVATE_OK) is True


def test_a_zone_id_is_refused_even_on_a_public_address() -> None:
    assert address_allowed(ipaddress.ip_address("2606:4700::1111%eth0"), PUBLIC) is False
