"""A small typed client for the OpenCode server's HTTP API (classic routes).

Every request carries the run's workspace as ``directory`` (OpenCode scopes
sessions, events and permissions by directory) and the server's basic-auth
password. Transport failures become ``executor_unavailable`` here, once.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from contracts import ErrorCode, GatehouseError, JsonObject, JsonValue, kept_loads
from worker.handlers.opencode.ban import refuse_parent

__all__ = ["OpencodeClient"]

_TIMEOUT = httpx.Timeout(30.0, connect=5.0)
_SETTLE_S = 10.0  # how long a session is waited for to stop being busy


class OpencodeClient:
    def __init__(self, url: str, password: str, directory: Path) -> None:
        self.url = url
        self.directory = str(directory)
        self._http = httpx.Client(
            base_url=url,
            auth=("opencode", password),
            timeout=_TIMEOUT,
            params={"directory": self.directory},
            trust_env=False,
        )

    def close(self) -> None:
        self._http.close()

    def _call(self, method: str, path: str, body: JsonObject | None = None) -> JsonValue:
        try:
            response = self._http.request(method, path, json=body)
        except httpx.HTTPError as exc:
            raise GatehouseError(
                ErrorCode.EXECUTOR_UNAVAILABLE,
                f"OpenCode {method} {path}: {type(exc).__name__}: {exc}"[:300],
            ) from exc
        if response.status_code >= 400:
            raise GatehouseError(
                ErrorCode.EXECUTOR_UNAVAILABLE,
                f"OpenCode {method} {path} answered {response.status_code}: {response.text[:200]}",
            )
        if not response.content:
            return None
        try:
            # NaN and the infinities kept as the placeholder: what is recorded must parse
            value: JsonValue = kept_loads(response.content)
        except (ValueError, RecursionError):
            return response.text
        return value

    def _object(self, method: str, path: str, body: JsonObject | None = None) -> JsonObject:
        value = self._call(method, path, body)
        if not isinstance(value, dict):
            raise GatehouseError(
                ErrorCode.EXECUTOR_UNAVAILABLE, f"OpenCode {method} {path}: not a JSON object"
            )
        return value

    def _list(self, path: str) -> list[JsonObject]:
        value = self._call("GET", path)
        return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []

    # -- sessions ----------------------------------------------------------------

    def create_session(self, title: str, permission: list[JsonValue]) -> JsonObject:
        body = refuse_parent({"title": title, "permission": permission})
        return self._object("POST", "/session", body)

    def sessions(self) -> list[JsonObject]:
        return self._list("/session")

    def statuses(self) -> JsonObject:
        value = self._call("GET", "/session/status")
        return value if isinstance(value, dict) else {}

    def messages(self, session_id: str, limit: int | None = None) -> list[JsonObject]:
        """The session's messages, oldest first (the latest ``limit`` of them)."""
        suffix = "" if limit is None else f"?limit={limit}"
        return self._list(f"/session/{session_id}/message{suffix}")

    def message(self, session_id: str, message_id: str) -> JsonObject:
        """One message with its parts (``{"info": …, "parts": […]}``)."""
        return self._object("GET", f"/session/{session_id}/message/{message_id}")

    def prompt_async(self, session_id: str, body: JsonObject) -> None:
        self._call("POST", f"/session/{session_id}/prompt_async", body)

    def abort(self, session_id: str) -> None:
        """Stop the session's turn, and return once OpenCode no longer holds it busy.

        The abort answers before the turn has wound down; a prompt sent into a
        session still busy is filed by OpenCode and never run (the timeout
        ladder sends its next rung right after), so this waits, a bounded while.
        """
        self._call("POST", f"/session/{session_id}/abort", {})
        self.wait_idle(session_id)

    def wait_idle(self, session_id: str, limit_s: float = _SETTLE_S) -> bool:
        """Wait until the session is not busy; False when it still is after ``limit_s``."""
        deadline = time.monotonic() + limit_s
        while True:
            status = self.statuses().get(session_id)
            if not (isinstance(status, dict) and status.get("type") in ("busy", "retry")):
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.05)

    def revert(self, session_id: str, message_id: str) -> JsonObject:
        return self._object("POST", f"/session/{session_id}/revert", {"messageID": message_id})

    # -- permissions ---------------------------------------------------------------

    def permissions(self) -> list[JsonObject]:
        return self._list("/permission")

    def reply(self, request_id: str, reply: str, message: str | None = None) -> None:
        body: JsonObject = {"reply": reply}
        if message:
            body["message"] = message
        self._call("POST", f"/permission/{request_id}/reply", body)

    # -- events ----------------------------------------------------------------------

    @contextmanager
    def event_lines(self) -> Iterator[Iterator[str]]:
        """The raw lines of ``GET /event`` (server-sent events), until closed."""
        try:
            with self._http.stream(
                "GET", "/event", timeout=httpx.Timeout(None, connect=5.0)
            ) as response:
                if response.status_code >= 400:
                    raise GatehouseError(
                        ErrorCode.EXECUTOR_UNAVAILABLE,
                        f"OpenCode GET /event answered {response.status_code}",
                    )
                yield response.iter_lines()
        except httpx.HTTPError as exc:
            raise GatehouseError(
                ErrorCode.EXECUTOR_UNAVAILABLE, f"OpenCode event stream: {exc}"[:300]
            ) from exc
