"""The edge: what wraps the whole app, the answers of its error handlers included.

Two things every request and every answer go through, outside everything else
(``create_app`` puts this around Starlette's own error middleware, so a 500 is
covered too):

* **Who is asking from where.** The client address is the connection's peer
  (``client_address``). Only when that peer is one of the configured proxies
  (``GATEHOUSE_TRUSTED_PROXIES``, none by default) are ``X-Forwarded-For`` and
  ``X-Forwarded-Proto`` believed, and then only as far back as the chain of
  trusted proxies reaches. The answer replaces the scope's ``client`` (and
  ``scheme``), so the door's per-address buckets, security events and the
  dashboard's cookie and origin checks all see the same address. The server
  must not rewrite it first: ``shim.local`` starts uvicorn with
  ``--no-proxy-headers``.
* **No answer is kept by a cache.** Every answer carries ``Cache-Control:
  no-store``: tokens, sessions, plans, artifacts and error details are private,
  and the few public answers (the probes, the OpenAPI document, the dashboard's
  script and style sheet) are small and cheap to send again. One rule with no
  exceptions cannot forget a new route.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from shim.settings import Proxies

__all__ = ["NO_STORE", "EdgeMiddleware", "client_address"]

NO_STORE = b"no-store"
# A forwarded chain longer than this is not followed further back (a header can be
# 8 KiB; walking thousands of entries for each request buys nothing).
_MAX_HOPS = 20


def _ip(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """An address as a proxy writes it: bare, ``[v6]``, ``v4:port`` or ``[v6]:port``."""
    value = text.strip()
    if value.startswith("[") and "]" in value:
        value = value[1 : value.index("]")]
    elif value.count(":") == 1:
        value = value.split(":", 1)[0]
    try:
        return ipaddress.ip_address(value)
    except ValueError:
        return None


def _trusted(address: ipaddress.IPv4Address | ipaddress.IPv6Address, proxies: Proxies) -> bool:
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return any(address.version == net.version and address in net for net in proxies)


def client_address(peer: str, forwarded_for: Sequence[str], proxies: Proxies) -> str:
    """The address a request comes from: ``peer`` (the connection's other end) unless it
    is a trusted proxy; then the nearest address in ``X-Forwarded-For`` (all its
    headers' entries in order, the nearest last) that is not one, as far as trusted
    proxies vouch for the chain. An entry that is no address ends the walk: the proxy
    that wrote it is the last one known, and its peer is the answer."""
    current = _ip(peer)
    if current is None or not proxies or not _trusted(current, proxies):
        return peer
    entries = [e for header in forwarded_for for e in header.split(",") if e.strip()]
    answer = peer
    for entry in reversed(entries[-_MAX_HOPS:]):
        hop = _ip(entry)
        if hop is None:
            return answer
        answer = str(hop)
        if not _trusted(hop, proxies):
            return answer
    return answer


def _header(headers: Sequence[tuple[bytes, bytes]], name: bytes) -> list[str]:
    return [v.decode("latin-1") for k, v in headers if k.lower() == name]


class EdgeMiddleware:
    """The ASGI side of the module's docstring: the address, then ``no-store``."""

    def __init__(self, app: ASGIApp, proxies: Proxies) -> None:
        self.app = app
        self.proxies = proxies

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if self.proxies:
            scope = self._forwarded(scope)

        async def no_store(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = [
                    (k, v) for k, v in message.get("headers", []) if k.lower() != b"cache-control"
                ]
                message["headers"] = [*headers, (b"cache-control", NO_STORE)]
            await send(message)

        await self.app(scope, receive, no_store)

    def _forwarded(self, scope: Scope) -> Scope:
        client = scope.get("client")
        peer = _ip(str(client[0])) if client else None
        if client is None or peer is None or not _trusted(peer, self.proxies):
            return scope
        headers: list[tuple[bytes, bytes]] = list(scope.get("headers", []))
        scope = dict(scope)
        address = client_address(str(client[0]), _header(headers, b"x-forwarded-for"), self.proxies)
        if address != str(client[0]):
            scope["client"] = (address, 0)  # the port seen is the proxy's
        proto = _header(headers, b"x-forwarded-proto")
        if proto:
            # the proxy nearest to the shim wrote the last value
            scheme = proto[-1].split(",")[-1].strip().lower()
            if scheme in ("http", "https"):
                scope["scheme"] = scheme
        return scope
