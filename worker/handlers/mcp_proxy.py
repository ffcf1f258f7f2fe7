"""The mcp_proxy handler: one tool call to an MCP server, through the official SDK.

Why it is shaped this way:

* The step's input is ``{"tool": name, "arguments": {...}}``; the gate already held
  it to the tool pool's allowlist and to the tool's *pinned* input schema
  (``policies/mcp.py``), and holds it again here before anything starts.
* Rug pulls: before calling, the handler lists the server's tools and recomputes
  the pin of the live definition (name, description, input schema). A tool whose
  definition differs from the pin, or that is gone, is refused
  (``mcp_tool_changed``, a security episode) and the call is not sent.
* One server per call: the server is started (stdio) or connected to (streamable
  HTTP) for this call and shut down after it, so no server outlives its call or
  its worker. A stdio server runs in the worker's bubblewrap sandbox (no network,
  its own working directory ``<workspace>/.mcp/<connector>`` the only writable
  place, the connector's ``read_only_paths`` visible read-only); without a
  sandbox it is refused (``sandbox_unavailable``) unless the profile says
  ``unsandboxed_shell: allowed``.
* A streamable-HTTP server's URL must match the connector's destinations, and its
  host resolves here to addresses that must all pass ``address_allowed``; plain
  ``http`` URLs are then sent to the checked address (as the http handler does).
* The result (content blocks, structured content, ``isError``) is outside data:
  capped at ``limits.max_output_bytes`` of canonical JSON, on the ``system_log``
  channel. ``isError`` is a ``failure`` (the tool said no), not a refusal.
* MCP has no idempotency keys: an interrupted call is in doubt (the ledger's
  rule), unless the connector lists the tool in ``read_only_tools``.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

import anyio
import httpx2
from pydantic import ValidationError

from contracts import (
    Connector,
    ErrorCode,
    GatehouseError,
    JsonObject,
    JsonValue,
    Limits,
    McpServer,
    McpTool,
    canonical_json,
    placeholder,
    sha256_hex,
)
from contracts.execution import ExecutionEnvelope, ExecutionResult
from contracts.tool_pool import mcp_tool_digest
from policies.destinations import match_destination
from policies.mcp import McpCall, check_call
from worker.handlers._base import HandlerContext, HandlerResult, answer, describe_invalid, limits_of
from worker.handlers.http import pin_url
from worker.sandbox import Sandbox, limits_for
from worker.sandbox.bwrap import current as current_sandbox

if TYPE_CHECKING:
    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters

__all__ = ["LiveTool", "list_live_tools", "run"]

_SAFE_PATH = "/usr/local/bin:/usr/bin:/bin"


@dataclass(frozen=True)
class LiveTool:
    """A tool as the server describes it now."""

    name: str
    description: str
    input_schema: JsonObject

    @property
    def digest(self) -> str:
        return mcp_tool_digest(self.name, self.description, self.input_schema)

    def as_pin(self) -> JsonObject:
        return {
            "name": self.name,
            "description": self.description,
            "input_schema": self.input_schema,
            "digest": self.digest,
        }


class _UnavailableError(Exception):
    """The server could not be started or reached: nothing was sent."""


def _failed(
    message: str, output: JsonObject, code: ErrorCode = ErrorCode.HANDLER_FAILED
) -> HandlerResult:
    return HandlerResult(ok=False, output=output, error_code=code, error_message=message[:2000])


def _leaves(exc: BaseException) -> list[BaseException]:
    """The exceptions inside (possibly nested) exception groups: the task groups' wrapping."""
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in _leaves(inner)]
    return [exc]


def _json_of(value: object) -> JsonValue:
    """Plain JSON the ledger can store: U+0000 replaced (PostgreSQL's jsonb cannot hold
    it), NaN and the infinities as the placeholder object (they are not JSON, and a
    string would look like one the server sent), keys as strings."""
    if isinstance(value, str):
        return value.replace("\x00", "\ufffd")
    if isinstance(value, bool | int) or value is None:
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else placeholder(value)
    if isinstance(value, dict):
        return {_text(k): _json_of(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_of(v) for v in value]
    return _text(value)


def _text(value: object) -> str:
    return str(value).replace("\x00", "\ufffd")


Use = Callable[["ClientSession"], Awaitable[object]]


@dataclass(frozen=True)
class _Target:
    """Where the server is and how it runs: what ``_with_session`` needs."""

    connector: Connector
    server: McpServer
    limits: Limits
    workdir: Path
    sandbox: Sandbox | None


async def _with_session(target: _Target, use: Use) -> object:
    """Start or reach the server, initialize a session, run ``use`` on it, shut down."""
    # The MCP SDK takes ~0.5 s to import: a worker pays it at its first MCP step, not
    # at every start.
    from mcp import ClientSession  # noqa: PLC0415
    from mcp.client.stdio import StdioServerParameters  # noqa: PLC0415
    from mcp.client.streamable_http import streamable_http_client  # noqa: PLC0415

    server = target.server
    if server.transport == "stdio":
        if server.command is None:  # pragma: no cover - the contract requires it
            raise _UnavailableError("the stdio server has no command")
        command, args = server.command, list(server.args)
        if target.sandbox is not None:
            prefix = target.sandbox.run_prefix(
                target.workdir,
                limits_for(target.limits),
                None,
                read_only=tuple(server.read_only_paths),
            )
            command, args = prefix[0], [*prefix[1:], command, *args]
        params = StdioServerParameters(
            command=command,
            args=args,
            env={"PATH": _SAFE_PATH, "LANG": "C.UTF-8", "HOME": str(target.workdir)},
            cwd=str(target.workdir),
        )
        with (target.workdir / "server-stderr.log").open("a", encoding="utf-8") as errlog:
            return await _stdio(params, errlog, use)
    if server.url is None:  # pragma: no cover - the contract requires it
        raise _UnavailableError("the streamable_http server has no url")
    destination = match_destination(server.url, target.connector)
    pinned = pin_url(server.url, destination)
    if isinstance(pinned, str):
        raise _UnavailableError(pinned)
    url, headers = server.url, {}
    if pinned.sni is None:  # plain http: to the checked address, named in Host
        url, headers = str(pinned.url), {"Host": pinned.host_header}
    timeout = httpx2.Timeout(target.limits.timeout_s)
    async with (
        httpx2.AsyncClient(
            headers=headers, timeout=timeout, trust_env=False, follow_redirects=False
        ) as client,
        streamable_http_client(url, http_client=client) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        return await use(session)


async def _stdio(params: StdioServerParameters, errlog: TextIO, use: Use) -> object:
    from mcp import ClientSession  # noqa: PLC0415  (see _with_session)
    from mcp.client.stdio import stdio_client  # noqa: PLC0415

    async with (
        stdio_client(params, errlog=errlog) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        return await use(session)


async def _live_tools(session: ClientSession) -> list[LiveTool]:
    from mcp.types import PaginatedRequestParams  # noqa: PLC0415  (see _with_session)

    found: list[LiveTool] = []
    cursor: str | None = None
    for _ in range(100):  # a server that pages forever is cut off
        page = await session.list_tools(
            params=None if cursor is None else PaginatedRequestParams(cursor=cursor)
        )
        for tool in page.tools:
            schema = _json_of(tool.input_schema)
            found.append(
                LiveTool(
                    name=tool.name,
                    description=tool.description or "",
                    input_schema=schema if isinstance(schema, dict) else {},
                )
            )
        cursor = page.next_cursor
        if cursor is None:
            break
    return found


def _changed(pinned: McpTool, live: list[LiveTool]) -> GatehouseError | None:
    """Why the live definition breaks the pin, or None when it matches."""
    now = next((t for t in live if t.name == pinned.name), None)
    if now is not None and now.digest == pinned.digest:
        return None
    what = "is gone" if now is None else "differs from its pin"
    details: JsonObject = {"tool": pinned.name, "pin": pinned.digest}
    if now is not None:
        details["live"] = now.digest
        details["changed"] = [
            part
            for part, same in (
                ("description", now.description == pinned.description),
                ("input_schema", canonical_json(now.input_schema)
                 == canonical_json(pinned.input_schema)),
            )
            if not same
        ]  # fmt: skip
    return GatehouseError(
        ErrorCode.MCP_TOOL_CHANGED,
        f"MCP tool {pinned.name!r}: the server's live definition {what}; the call was not sent",
        details,
    )


def _run_async(target: _Target, use: Use) -> object:
    """``use`` against the server within the connector's timeout; exceptions unwrapped."""

    async def bounded() -> object:
        with anyio.fail_after(target.limits.timeout_s):
            return await _with_session(target, use)

    try:
        return anyio.run(bounded)
    except BaseException as exc:  # unwrapped from the task groups, re-raised below
        leaves = _leaves(exc)
        for wanted in (GatehouseError, TimeoutError, _UnavailableError):
            for leaf in leaves:
                if isinstance(leaf, wanted):
                    raise leaf from exc
        if any(not isinstance(leaf, Exception) for leaf in leaves):
            raise
        first = leaves[0]
        if isinstance(first, OSError | httpx2.ConnectError):
            raise _UnavailableError(f"{type(first).__name__}: {first}") from exc
        raise


def _workdir(envelope: ExecutionEnvelope, connector_id: str) -> Path:
    """The server's own working directory inside the run's workspace."""
    root = envelope.workspace.resolve() / ".mcp" / connector_id
    root.mkdir(parents=True, exist_ok=True)
    return root


def list_live_tools(connector: Connector, workdir: Path, sandbox: Sandbox | None) -> list[LiveTool]:
    """The server's tools as it describes them now (for pinning and checking pins)."""
    if connector.mcp is None or connector.limits is None:
        raise GatehouseError(
            ErrorCode.LIMITS_MISSING,
            f"connector {connector.connector_id!r} is not an mcp_proxy connector with limits",
        )
    target = _Target(connector, connector.mcp, connector.limits, workdir, sandbox)

    async def use(session: ClientSession) -> object:
        return await _live_tools(session)

    found = _run_async(target, use)
    return found if isinstance(found, list) else []


def run(envelope: ExecutionEnvelope, _context: HandlerContext) -> ExecutionResult:
    """Call one pinned tool with the step's arguments and record what came back."""
    return answer(envelope, _call(envelope))


def _call(envelope: ExecutionEnvelope) -> HandlerResult:
    limits = limits_of(envelope)
    connector = envelope.gatehouse.connector
    server = connector.mcp
    if server is None:
        return _failed("the connector names no MCP server", {})
    try:
        spec = McpCall.model_validate(envelope.arguments)
    except ValidationError as exc:
        return _failed(f"invalid mcp_proxy input: {describe_invalid(exc)}", {})
    pinned = check_call(envelope.task_id, envelope.arguments, connector)
    output: JsonObject = {
        "server": server.identity,
        "transport": server.transport,
        "tool": pinned.name,
        "pin": pinned.digest,
        "channel": "system_log",
    }
    sandbox: Sandbox | None = None
    if server.transport == "stdio":
        found = current_sandbox()
        if isinstance(found, str):
            if envelope.gatehouse.unsandboxed_shell != "allowed":
                output["sandbox"] = {"tool": "none", "reason": found}
                return _failed(f"not run: {found}", output, ErrorCode.SANDBOX_UNAVAILABLE)
            output["sandbox"] = {"tool": "none", "reason": found, "allowed_by": "profile"}
        else:
            sandbox = found
            output["sandbox"] = found.profile(limits_for(limits))
    try:
        workdir = _workdir(envelope, connector.connector_id)
    except OSError as exc:
        return _failed(f"cannot make the server's working directory: {exc}", output)
    target = _Target(connector, server, limits, workdir, sandbox)
    sent: list[bool] = []  # set once the tools/call request may have left

    async def use(session: ClientSession) -> object:
        problem = _changed(pinned, await _live_tools(session))
        if problem is not None:
            return problem  # returned, not raised: the task groups would wrap it
        sent.append(True)
        return await session.call_tool(pinned.name, spec.arguments)

    try:
        got = _run_async(target, use)
    except TimeoutError:
        return _failed(
            f"the MCP call ran past {limits.timeout_s}s", output, ErrorCode.HANDLER_TIMEOUT
        )
    except _UnavailableError as exc:
        if sent:  # the call may have reached the tool: never "certainly not applied"
            return _failed(f"the connection failed during the call: {exc}", output)
        # Nothing reached the tool: certainly not applied, so it may be sent again.
        return _failed(str(exc), output, ErrorCode.UPSTREAM_UNAVAILABLE)
    except GatehouseError:
        raise
    except Exception as exc:  # noqa: BLE001 - the SDK's failures are results, not panics
        return _failed(f"{type(exc).__name__}: {exc}", output)
    if isinstance(got, GatehouseError):
        raise got
    return _result(got, output, limits)


def _result(got: object, output: JsonObject, limits: Limits) -> HandlerResult:
    dump = getattr(got, "model_dump", None)
    # Python values, made JSON by _json_of: pydantic's JSON mode writes infinity and
    # NaN as null, which would record a number the server never sent.
    raw = dump(mode="python", by_alias=True, exclude_none=True) if callable(dump) else {}
    data = _json_of(raw)
    result = data if isinstance(data, dict) else {}
    is_error = bool(result.get("isError", False))
    kept: JsonObject = {"content": result.get("content", [])}
    if "structuredContent" in result:
        kept["structured_content"] = result["structuredContent"]
    text = canonical_json(kept)
    size = len(text.encode("utf-8"))
    output.update({"is_error": is_error, "bytes": size, "sha256": sha256_hex(text.encode("utf-8"))})
    if size > limits.max_output_bytes:
        cut = text.encode("utf-8")[: limits.max_output_bytes].decode("utf-8", errors="ignore")
        output.update({"truncated": True, "content": [{"type": "text", "text": cut}]})
    else:
        output.update({"truncated": False, **kept})
    if is_error:
        return _failed(f"MCP tool {output['tool']} answered isError", output)
    return HandlerResult(ok=True, output=output)
