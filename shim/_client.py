"""A small HTTP client for the Gatehouse API, used by the CLI and the demo."""

from __future__ import annotations

import json
import time
from typing import Any

import httpx

__all__ = ["ApiError", "Client"]


class ApiError(Exception):
    def __init__(self, status: int, body: Any) -> None:
        err = body.get("error", {}) if isinstance(body, dict) else {}
        self.status = status
        self.code = str(err.get("code", "unknown"))
        self.message = str(err.get("message", body))
        super().__init__(f"HTTP {status} {self.code}: {self.message}")


class Client:
    def __init__(self, base_url: str, timeout: float = 30) -> None:
        self.base_url = base_url.rstrip("/")
        self._http = httpx.Client(base_url=self.base_url, timeout=timeout, trust_env=False)

    def close(self) -> None:
        self._http.close()

    def _call(
        self, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None
    ) -> Any:
        r = self._http.request(method, path, json=body, headers=headers)
        try:
            data = r.json()
        except json.JSONDecodeError:
            data = r.text
        if r.status_code >= 400:
            raise ApiError(r.status_code, data)
        return data

    def submit(self, intent: dict[str, Any], idempotency_key: str | None = None) -> Any:
        headers = {"Idempotency-Key": idempotency_key} if idempotency_key else None
        return self._call("POST", "/intent", intent, headers)

    def run(self, run_id: str) -> Any:
        return self._call("GET", f"/runs/{run_id}")

    def runs(self, status: str | None = None) -> Any:
        return self._call("GET", "/runs" + (f"?status={status}" if status else ""))

    def decide(
        self, run_id: str, approve: bool, digest: str, by: str, comment: str | None = None
    ) -> Any:
        body: dict[str, Any] = {"plan_digest": digest, "decided_by": by}
        if comment:
            body["comment"] = comment
        return self._call("POST", f"/{'approve' if approve else 'reject'}/{run_id}", body)

    def ledger(self, run_id: str) -> Any:
        return self._call("GET", f"/runs/{run_id}/ledger")

    def episodes(self, run_id: str) -> Any:
        return self._call("GET", f"/runs/{run_id}/episodes")

    def artifacts(self, run_id: str) -> Any:
        return self._call("GET", f"/runs/{run_id}/artifacts")

    def wait(self, run_id: str, statuses: set[str], timeout: float, on_poll: Any = None) -> Any:
        deadline = time.monotonic() + timeout
        while True:
            view = self.run(run_id)
            if on_poll is not None:
                on_poll(view)
            if view["status"] in statuses:
                return view
            if time.monotonic() > deadline:
                raise TimeoutError(f"run {run_id} is still {view['status']} after {timeout:.0f} s")
            time.sleep(0.25)
