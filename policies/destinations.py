"""HTTP destination policy: which URLs and which resolved addresses a step may reach.

Pure functions, no I/O. Two separate checks exist because a URL that names an
allowlisted host can still resolve to a forbidden address (DNS pointing at
``127.0.0.1``, or spellings such as ``2130706433`` / ``0x7f.1`` that
``ipaddress`` refuses but ``getaddrinfo`` happily resolves). So the plan gate
and the handler call :func:`match_destination` on the URL, and the handler
then calls :func:`address_allowed` on every address the host *resolved to*.
"""

from __future__ import annotations

import ipaddress
import re
from urllib.parse import unquote, urlsplit

from contracts import Connector, Destination, ErrorCode, GatehouseError, JsonObject

__all__ = ["address_allowed", "is_loopback", "match_destination"]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

_DEFAULT_PORTS = {"http": 80, "https": 443}
# Control characters and whitespace: urlsplit silently strips some of them
# (tab, CR, LF) while other URL parsers do not, so a URL carrying any of them
# could be read differently by the policy and by the HTTP client. Refuse them.
_UNSAFE_CHARS = re.compile(r"[\x00-\x20\x7f]")
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
_NAT64_LOCAL = ipaddress.IPv6Network("64:ff9b:1::/48")  # RFC 8215, local use only
_IPV4_COMPATIBLE = ipaddress.IPv6Network("::/96")  # deprecated; never a public target
# IANA's special-purpose blocks that are not globally reachable (plus multicast and
# the deprecated site-local block), checked by name because ``is_global`` depends on
# the Python patch release: 3.11.7 calls 192.0.0.192 (Oracle Cloud's older metadata
# address) and 192.0.0.8 global, and no 3.11 knows 3fff::/20 or 100:0:0:1::/64. 192.0.0.9 and
# 192.0.0.10 (anycast PCP and TURN) are refused too: no step has reason to call them.
_NOT_GLOBAL: tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...] = tuple(
    ipaddress.ip_network(block)
    for block in (
        "0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16",
        "172.16.0.0/12", "192.0.0.0/24", "192.0.2.0/24", "192.168.0.0/16", "198.18.0.0/15",
        "198.51.100.0/24", "203.0.113.0/24", "224.0.0.0/4", "240.0.0.0/4",
        "::/128", "::1/128", "::ffff:0:0/96", "64:ff9b:1::/48", "100::/64", "100:0:0:1::/64",
        "2001:2::/48", "2001:10::/28", "2001:db8::/32", "3fff::/20", "5f00::/16", "fc00::/7",
        "fe80::/10", "fec0::/10", "ff00::/8",
    )
)  # fmt: skip


def _refuse(message: str, url: str, **extra: str | int) -> GatehouseError:
    details: JsonObject = {"url": url[:512]}
    details.update(extra)
    return GatehouseError(ErrorCode.DESTINATION_NOT_ALLOWED, message, details)


def _has_dot_dot_segment(path: str) -> bool:
    """True if any path segment is ``..``, raw or percent-encoded.

    Servers may decode ``%2e%2e`` and treat a backslash as a separator, so both
    spellings are checked (the decoded one once: a double-encoded path is not
    decoded twice by a conforming server, and its raw form holds no ``..``).
    """
    for candidate in (path, unquote(path)):
        for segment in re.split(r"[/\\]", candidate):
            if segment == "..":
                return True
    return False


def _prefix_matches(path: str, prefix: str) -> bool:
    """Prefix match on whole segments: ``/api`` allows ``/api`` and ``/api/x``, not ``/apix``."""
    if not path.startswith(prefix):
        return False
    if prefix.endswith("/") or len(path) == len(prefix):
        return True
    return path[len(prefix)] == "/"


def _normalise_host(host: str) -> str:
    return host.strip("[]").lower()


def match_destination(url: str, connector: Connector) -> Destination:
    """Return the connector's destination that allows ``url``, or raise a refusal.

    The match is exact on scheme, host (case-insensitive) and effective port
    (80/443 when the URL names none), and the path must lie under the entry's
    ``path_prefix``. Anything ambiguous (userinfo, control characters, ``..``
    segments, an unparsable port) is refused rather than interpreted.
    """
    if not isinstance(url, str) or not url:
        raise _refuse("the url must be a non-empty string", str(url))
    if _UNSAFE_CHARS.search(url):
        raise _refuse("the url contains whitespace or control characters", url)
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise _refuse(f"the url does not parse: {exc}", url) from exc
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS:
        raise _refuse("only http and https urls are allowed", url, scheme=scheme)
    if "@" in parts.netloc:
        raise _refuse("urls with userinfo (user@host) are not allowed", url)
    host = parts.hostname
    if not host:
        raise _refuse("the url names no host", url)
    effective_port = port if port is not None else _DEFAULT_PORTS[scheme]
    path = parts.path or "/"
    if _has_dot_dot_segment(path):
        raise _refuse("the url path contains a '..' segment", url)

    for destination in connector.destinations:
        if destination.scheme != scheme:
            continue
        if _normalise_host(destination.host) != _normalise_host(host):
            continue
        if destination.ports is not None and effective_port not in destination.ports:
            continue
        if not _prefix_matches(path, destination.path_prefix):
            continue
        return destination
    raise _refuse(
        "no allowlisted destination matches the url",
        url,
        connector_id=connector.connector_id,
        scheme=scheme,
        host=host,
        port=effective_port,
    )


def _is_public(address: IPAddress) -> bool:
    """``is_global``, and in none of the blocks it lets through on some Python.

    In 3.11 multicast, ``fec0::/10``, ``64:ff9b:1::/48`` and parts of
    ``192.0.0.0/24`` report global, so the non-global blocks are listed in
    ``_NOT_GLOBAL`` and every non-unicast-public class is also checked by name.
    """
    return (
        address.is_global
        and not any(address in block for block in _NOT_GLOBAL)
        and not address.is_private
        and not address.is_loopback
        and not address.is_link_local
        and not address.is_multicast
        and not address.is_reserved
        and not address.is_unspecified
        and not (isinstance(address, ipaddress.IPv6Address) and address.is_site_local)
    )


def _embedded_ipv4(address: ipaddress.IPv6Address) -> list[ipaddress.IPv4Address] | None:
    """The IPv4 addresses an IPv6 address tunnels to, or None if it embeds none."""
    if address.ipv4_mapped is not None:
        return [address.ipv4_mapped]
    if address.sixtofour is not None:
        return [address.sixtofour]
    if address.teredo is not None:
        server, client = address.teredo
        return [server, client]
    if address in _NAT64:
        return [ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)]
    return None


def address_allowed(ip: IPAddress, destination: Destination) -> bool:
    """True if a handler may connect to ``ip`` for ``destination``.

    Private, loopback, link-local, CGNAT and other non-global addresses are
    refused unless the destination sets ``allow_private``. IPv6 forms that
    carry an IPv4 address (mapped, 6to4, Teredo, NAT64) are judged by the IPv4
    address they lead to, so ``::ffff:169.254.169.254`` is the metadata
    service, not a public IPv6 host.
    """
    if destination.allow_private:
        return True
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.scope_id:
            return False
        embedded = _embedded_ipv4(ip)
        if embedded is not None:
            return all(_is_public(v4) for v4 in embedded)
        if ip in _NAT64_LOCAL or ip in _IPV4_COMPATIBLE:
            return False
    return _is_public(ip)


def is_loopback(url_or_host: str, *, is_url: bool) -> bool:
    """The URL's host (``is_url``) or the host itself is this machine: ``localhost`` or
    a loopback address. A name other than ``localhost`` may resolve anywhere: no."""
    host = (urlsplit(url_or_host).hostname or "") if is_url else url_or_host.strip("[]")
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
