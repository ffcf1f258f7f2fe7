"""http: one HTTP request to a destination the connector allows."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import ClassVar
from urllib.parse import urlsplit

from contracts import (
    Connector,
    DriverKind,
    ErrorCode,
    GatehouseError,
    JsonObject,
    JsonValue,
    PlanStep,
    ToolPool,
)
from policies.cedar_vocab import attr
from policies.destinations import is_loopback, match_destination
from policies.kinds._base import KindRules, Said, Wrong, require_str, text_of
from policies.step_inputs import http_input

__all__ = ["Http"]

# Header names whose values are credentials: shown as ••• on the card.
_SECRET = re.compile(r"authorization|cookie|token|secret|password|api[-_]?key", re.IGNORECASE)


class Http(KindRules):
    kind: ClassVar[DriverKind] = DriverKind.HTTP
    never_data: ClassVar[tuple[str, ...]] = ("/url", "/method", "/headers", "/save_as")

    def check_input(
        self, step: PlanStep, step_input: JsonObject, connector: Connector, details: JsonObject
    ) -> None:
        match_destination(require_str(step, step_input, "url"), connector)
        found = http_input(step_input)
        if isinstance(found, str):  # what the handler would refuse, refused now
            raise GatehouseError(ErrorCode.PLAN_INVALID, f"step {step.step_id!r}: {found}", details)

    def cedar_schema(self, pools: Sequence[ToolPool]) -> dict[str, JsonValue]:
        return {
            "method": attr("String", False),
            "url": attr("String", False),
            "scheme": attr("String", False),
            "host": attr("String", False),
            "port": attr("Long", False),
            "path": attr("String", False),
        }

    def cedar_context(self, step_input: JsonObject, pool: ToolPool, wrong: Wrong) -> JsonObject:
        out: JsonObject = {}
        url = step_input.get("url")
        method = step_input.get("method", "GET")
        if isinstance(method, str):
            out["method"] = method.upper()
        else:
            wrong("method", "a string")
        if isinstance(url, str):
            parts = urlsplit(url)
            out.update(url=url, scheme=parts.scheme, host=parts.hostname or "", path=parts.path)
            try:
                port = parts.port
            except ValueError:
                port = None
                wrong("url", "a URL with a valid port")
            out["port"] = port or (443 if parts.scheme == "https" else 80)
        else:
            wrong("url", "a string")
        return out

    def said(self, given: JsonObject, connector_id: str) -> Said:
        method = text_of(given, "method", "GET").upper()
        url = text_of(given, "url")
        host = urlsplit(url).netloc or "(an address from outside data)"
        body = " with a JSON body" if given.get("json") is not None else ""
        return Said(f"Sends {method} to {url or host}{body}", destination=f"{method} {host}")

    def request(
        self, given: JsonObject, connector_id: str, connector: Connector | None
    ) -> str | None:
        parts = urlsplit(text_of(given, "url"))
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        method = text_of(given, "method", "GET").upper()
        lines = [f"{method} {target} HTTP/1.1", f"Host: {parts.netloc}"]
        headers = given.get("headers")
        for name, value in headers.items() if isinstance(headers, dict) else []:
            lines.append(f"{name}: {'•••' if _SECRET.search(name) else value}")
        if connector is None or connector.idempotency == "key":
            lines.append("Idempotency-Key: (the call's op key, fixed when it runs)")
        lines.append("Accept-Encoding: identity")
        body = given.get("json")
        if "json" in given:
            if not (
                isinstance(headers, dict) and any(k.lower() == "content-type" for k in headers)
            ):
                lines.append("Content-Type: application/json")
            lines += ["", json.dumps(body, ensure_ascii=False, allow_nan=False)]
        return "\n".join(lines)

    def read_only(self, step_input: JsonObject | None, connector: Connector | None) -> bool:
        method = None if step_input is None else step_input.get("method", "GET")
        return isinstance(method, str) and method.upper() in {"GET", "HEAD"}

    def leaves_machine(self, given: JsonObject | None, connector: Connector | None) -> bool:
        """Unless its URL is loopback, or (its URL not known yet) every destination its
        connector allows is."""
        url = given.get("url") if given is not None else None
        if isinstance(url, str) and url:
            return not is_loopback(url, is_url=True)
        if connector is None or not connector.destinations:
            return True
        return not all(is_loopback(d.host, is_url=False) for d in connector.destinations)

    def may_resend(self, connector: Connector, step_input: JsonObject) -> bool:
        return connector.idempotency == "key"
