"""The http handler: one HTTP request to an allowlisted destination.

Why it is shaped this way:

* The URL is matched against the connector (``match_destination``), then the
  host is resolved *here* and every resolved address must pass
  ``address_allowed``. The request is then sent to that exact address (the
  URL's host is replaced by the IP, with ``Host`` and TLS SNI set to the
  original name), so a second DNS answer cannot swap in a private address
  between the check and the connection (DNS rebinding).
* No proxies from the environment, no redirects: either could lead the call
  somewhere the allowlist never saw.
* ``Idempotency-Key`` is the ledger's op key, so a call sent again after a
  crash is recognisable by the callee; the caller cannot set or override it.
  A connector marked ``idempotency: "none"`` (a callee that ignores keys)
  sends none, and an interrupted call to it is in doubt instead.
* The body is read raw (``Accept-Encoding: identity``) and reading stops at
  ``limits.max_output_bytes``; the count is of bytes actually received, so a
  compressed or endless body cannot exhaust memory.
* Failures of the call (timeouts, HTTP >= 400, transport errors) are results;
  only policy refusals raise ``GatehouseError``. A refused connection and an
  HTTP 429/503 answer are ``upstream_unavailable``: certainly not applied,
  so the workflow may retry them as a new attempt.
"""

from __future__ import annotations

import ipaddress
import json
import os
import socket
import time
from pathlib import Path

import httpx

from contracts import (
    Destination,
    ErrorCode,
    GatehouseError,
    JsonObject,
    JsonValue,
    canonical_json,
    sha256_hex,
    strict_loads,
)
from contracts.execution import ExecutionEnvelope, ExecutionResult
from policies.destinations import address_allowed, match_destination
from policies.step_inputs import http_input
from worker.handlers._base import (
    Artifact,
    HandlerContext,
    HandlerResult,
    answer,
    limits_of,
)

__all__ = ["Pinned", "pin_url", "run"]

_TEXT_CAP = 4096
_DEFAULT_PORTS = {"http": 80, "https": 443}


class Pinned:
    """Where the request really goes: the checked IP, plus the name it stands for."""

    def __init__(self, url: httpx.URL, host_header: str, sni: str | None) -> None:
        self.url = url
        self.host_header = host_header
        self.sni = sni


def _failed(message: str, output: JsonObject | None = None) -> HandlerResult:
    return HandlerResult(
        ok=False,
        output=output if output is not None else {},
        error_code=ErrorCode.HANDLER_FAILED,
        error_message=message[:2000],
    )


def _refuse(message: str, url: str, **extra: str) -> GatehouseError:
    details: JsonObject = {"url": url[:512]}
    details.update(extra)
    return GatehouseError(ErrorCode.DESTINATION_NOT_ALLOWED, message, details)


def pin_url(url: str, destination: Destination) -> Pinned | str:
    """Resolve and check the host; return the pinned target or a failure message.

    httpx parses the URL again, so its reading must agree with the policy's
    (scheme, host, port) or the call is refused: parser differentials are a
    classic way around URL allowlists.
    """
    try:
        parsed = httpx.URL(url)
    except httpx.InvalidURL as exc:
        raise _refuse(f"httpx cannot parse the url: {exc}", url) from exc
    port = parsed.port if parsed.port is not None else _DEFAULT_PORTS.get(parsed.scheme, 0)
    if (
        parsed.scheme != destination.scheme
        or parsed.host != destination.host.strip("[]").lower()
        or (destination.ports is not None and port not in destination.ports)
    ):
        raise _refuse("the http client reads the url differently from the policy", url)

    try:
        infos = socket.getaddrinfo(parsed.host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as exc:
        return f"cannot resolve {parsed.host!r}: {type(exc).__name__}: {exc}"
    addresses: list[ipaddress.IPv4Address | ipaddress.IPv6Address] = []
    for info in infos:
        address = ipaddress.ip_address(str(info[4][0]))
        if address not in addresses:
            addresses.append(address)
    if not addresses:
        return f"{parsed.host!r} resolved to no address"
    for address in addresses:
        if not address_allowed(address, destination):
            raise _refuse(
                "the host resolves to an address that is not allowed",
                url,
                host=parsed.host,
                address=str(address),
            )
    sni = parsed.host if parsed.scheme == "https" else None
    host_header = parsed.netloc.decode("ascii")
    try:
        pinned_url = parsed.copy_with(host=str(addresses[0]))
    except httpx.InvalidURL as exc:
        return f"cannot address {addresses[0]}: {exc}"
    return Pinned(pinned_url, host_header, sni)


def _read_capped(response: httpx.Response, cap: int, deadline: float) -> tuple[bytes, bool]:
    """Read at most ``cap`` raw bytes; report whether the body had more."""
    chunks: list[bytes] = []
    size = 0
    for chunk in response.iter_raw():
        if time.monotonic() > deadline:
            raise httpx.ReadTimeout("the overall timeout passed while reading the body")
        room = cap - size
        if len(chunk) > room:
            chunks.append(chunk[:room])
            return b"".join(chunks), True
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks), False


def _parse_json(body: bytes) -> JsonValue | None:
    """The parsed body, or None when it is not strict JSON the ledger can store.

    NaN/Infinity are refused (not JSON) and so is U+0000 (PostgreSQL's jsonb
    cannot hold it). A JSON ``null`` body also yields None; the text is kept.
    """

    try:
        parsed = strict_loads(body)
        if "\\u0000" in canonical_json(parsed):
            return None
    except (ValueError, RecursionError):
        return None
    return parsed


def _is_json_type(content_type: str | None) -> bool:
    if content_type is None:
        return False
    media_type = content_type.split(";", 1)[0].strip().lower()
    return media_type == "application/json" or media_type.endswith("+json")


def _save(workspace: Path, name: str, body: bytes) -> None:
    """Write inside the workspace only: no path separators, no following symlinks."""
    root = workspace.resolve()
    target = root / name
    if target.parent != root or name.startswith("."):
        raise OSError(f"{name!r} is not a plain file name inside the workspace")
    dir_fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        flags = os.O_CREAT | os.O_WRONLY | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(name, flags, 0o644, dir_fd=dir_fd)
    finally:
        os.close(dir_fd)
    with os.fdopen(fd, "wb") as handle:
        handle.write(body)


def run(envelope: ExecutionEnvelope, _context: HandlerContext) -> ExecutionResult:
    """Send one request as the envelope's arguments describe and record what came back."""
    return answer(envelope, _send(envelope))


def _send(envelope: ExecutionEnvelope) -> HandlerResult:
    limits = limits_of(envelope)
    connector = envelope.gatehouse.connector
    spec = http_input(envelope.arguments)  # the gate ran the same checks on the plan
    if isinstance(spec, str):
        return _failed(spec)

    content: bytes | None = None
    if "body" in spec.model_fields_set:
        try:
            content = json.dumps(spec.body, ensure_ascii=False, allow_nan=False).encode("utf-8")
        except ValueError as exc:
            return _failed(f"the json body is not valid JSON: {exc}")

    destination = match_destination(spec.url, connector)
    pinned = pin_url(spec.url, destination)
    if isinstance(pinned, str):
        return _failed(pinned)

    headers = httpx.Headers(spec.headers)
    headers["Host"] = pinned.host_header
    if connector.idempotency == "key":
        headers["Idempotency-Key"] = envelope.gatehouse.op_key
    headers["Accept-Encoding"] = "identity"
    if content is not None and "content-type" not in headers:
        headers["Content-Type"] = "application/json"
    extensions = {"sni_hostname": pinned.sni} if pinned.sni else {}

    deadline = time.monotonic() + limits.timeout_s
    try:
        with httpx.Client(
            trust_env=False, follow_redirects=False, timeout=limits.timeout_s
        ) as client:
            request = client.build_request(
                spec.method, pinned.url, headers=headers, content=content, extensions=extensions
            )
            response = client.send(request, stream=True)
            try:
                body, truncated = _read_capped(response, limits.max_output_bytes, deadline)
            finally:
                response.close()
    except httpx.TimeoutException as exc:
        return HandlerResult(
            ok=False,
            output={"url": spec.url},
            error_code=ErrorCode.HANDLER_TIMEOUT,
            error_message=f"{type(exc).__name__}: {exc}"[:2000],
        )
    except httpx.ConnectError as exc:
        # Nothing was sent: the call certainly did not take effect, so the
        # workflow may send it again as a new attempt.
        return HandlerResult(
            ok=False,
            output={"url": spec.url},
            error_code=ErrorCode.UPSTREAM_UNAVAILABLE,
            error_message=f"{type(exc).__name__}: {exc}"[:2000],
        )
    except (httpx.HTTPError, httpx.InvalidURL) as exc:
        return _failed(f"{type(exc).__name__}: {exc}", {"url": spec.url})

    content_type = response.headers.get("content-type")
    reported: JsonObject = {}
    if content_type is not None:
        reported["content-type"] = content_type
    if "content-length" in response.headers:
        reported["content-length"] = response.headers["content-length"]
    output: JsonObject = {
        "status": response.status_code,
        "headers": reported,
        "bytes": len(body),
        "truncated": truncated,
        "body_sha256": sha256_hex(body),
    }
    parsed = _parse_json(body) if _is_json_type(content_type) and not truncated else None
    if parsed is not None:
        output["json"] = parsed
    else:
        # U+0000 is replaced too: PostgreSQL's jsonb cannot store it.
        text = body.decode("utf-8", errors="replace")[:_TEXT_CAP]
        output["text"] = text.replace("\x00", "\ufffd")
    artifacts = (
        Artifact(
            name="response_body",
            media_type=content_type or "application/octet-stream",
            content=body,
        ),
    )
    if spec.save_as is not None:
        try:
            _save(envelope.workspace, spec.save_as, body)
        except OSError as exc:
            return _failed(f"cannot save the body as {spec.save_as!r}: {exc}", output)
        output["saved_as"] = spec.save_as

    if response.status_code >= 400:
        # 429 and 503 say the callee did not process the request: retryable.
        unavailable = response.status_code in (429, 503)
        return HandlerResult(
            ok=False,
            output=output,
            error_code=ErrorCode.UPSTREAM_UNAVAILABLE if unavailable else ErrorCode.HANDLER_FAILED,
            error_message=f"HTTP {response.status_code}",
            artifacts=artifacts,
        )
    return HandlerResult(ok=True, output=output, artifacts=artifacts)
