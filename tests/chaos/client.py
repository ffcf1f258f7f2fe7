"""The harness's side of HTTP: every answer counted.

``Api`` is the Gatehouse API as the chaos harness calls it. Every answer is
counted by route and status in ``Figures``. While the database is away the shim
must answer 503, which ``Api.call`` waits out; while a disk is full, 507
``storage_full``; any other 5xx is a failure and is recorded with its body.
``say`` prints one progress line.
"""

from __future__ import annotations

import re
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import httpx

from shim.cli.client import KEEPALIVE

__all__ = ["Api", "Figures", "say"]

_RUN_ID = re.compile(r"run_[0-9a-f]{32}")
_HEX64 = re.compile(r"[0-9a-f]{64}")


def _route(method: str, path: str) -> str:
    """``GET /runs/{run_id}`` rather than one label per run."""
    path = path.split("?", 1)[0]
    return f"{method} " + _HEX64.sub("{key}", _RUN_ID.sub("{run_id}", path))


def say(message: str) -> None:
    """One progress line; a long run shows it is alive."""
    print(f"[chaos {time.strftime('%H:%M:%S')}] {message}", flush=True)


@dataclass
class Figures:
    """What happened, counted; thread-safe. Becomes the results JSON."""

    counters: Counter[str] = field(default_factory=Counter)
    statuses: dict[str, Counter[int]] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, name: str, n: int = 1) -> None:
        with self.lock:
            self.counters[name] += n

    def status(self, route: str, code: int) -> None:
        with self.lock:
            self.statuses.setdefault(route, Counter())[code] += 1

    def fail(self, message: str) -> None:
        with self.lock:
            self.failures.append(message)
        say(f"FAILURE: {message}")

    def get(self, name: str) -> int:
        with self.lock:
            return self.counters[name]


class Api:
    """The Gatehouse HTTP API as the harness uses it: waits out 503s, counts everything."""

    def __init__(self, base_url: str, tokens: dict[str, str], figures: Figures) -> None:
        self.base_url = base_url
        self.tokens = tokens
        self.figures = figures
        self._http = httpx.Client(base_url=base_url, timeout=180, trust_env=False, limits=KEEPALIVE)

    def close(self) -> None:
        self._http.close()

    def once(
        self,
        method: str,
        path: str,
        who: str,
        body: Any = None,
        headers: dict[str, str] | None = None,
    ) -> httpx.Response:
        """One request, counted; a 5xx other than 503 is recorded as a failure."""
        sent = {"Authorization": f"Bearer {self.tokens[who]}", **(headers or {})}
        r = self._http.request(method, path, json=body, headers=sent)
        route = _route(method, path)
        self.figures.status(route, r.status_code)
        if r.status_code == 503:
            self.figures.add("http_503")
        elif r.status_code == 507 and r.json().get("error", {}).get("code") == "storage_full":
            self.figures.add("http_507_storage_full")  # a full disk (tests/chaos/test_full_disk.py)
        elif r.status_code >= 500:
            self.figures.add("http_5xx_not_503")
            self.figures.fail(f"{route} answered {r.status_code}: {r.text[:300]}")
        return r

    def with_token(self, method: str, path: str, token: str) -> httpx.Response:
        """One request under a token nobody was given (not counted)."""
        return self._http.request(method, path, headers={"Authorization": f"Bearer {token}"})

    def call(
        self,
        method: str,
        path: str,
        who: str,
        body: Any = None,
        headers: dict[str, str] | None = None,
        timeout: float = 180,
    ) -> httpx.Response:
        """Like ``once``, but a 503 (database away) or a dropped connection is retried."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                r = self.once(method, path, who, body, headers)
            except httpx.TransportError as exc:
                self.figures.add("http_transport_errors")
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{method} {path}: {exc}") from exc
                time.sleep(0.2)
                continue
            if r.status_code != 503:
                return r
            if time.monotonic() > deadline:
                raise TimeoutError(f"{method} {path} kept answering 503 for {timeout:.0f} s")
            time.sleep(0.2)

    def json(self, method: str, path: str, who: str, body: Any = None) -> Any:
        r = self.call(method, path, who, body)
        if r.status_code >= 400:
            raise AssertionError(f"{method} {path} answered {r.status_code}: {r.text[:500]}")
        return r.json()
