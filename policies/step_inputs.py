"""What a step's input must be for its handler: the checks knowable from the plan.

The http and restricted_shell handlers read their input through these models
and checks, and the gate runs the same ones on every step whose input is known,
so what the step would refuse (a ``save_as`` outside the workspace, stdin over
its limit, a header the handler sets itself) is refused before a person is asked
to approve it, not when the step runs.
"""

from __future__ import annotations

import re
from typing import Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from contracts import JsonObject, JsonValue

__all__ = [
    "MAX_STDIN_BYTES",
    "HttpInput",
    "ShellInput",
    "describe_invalid",
    "http_input",
    "shell_input",
]

M = TypeVar("M", bound=BaseModel)
MAX_STDIN_BYTES = 64 * 1024
_HEADER_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,128}$")
_HEADER_VALUE_FORBIDDEN = re.compile(r"[\x00\r\n]")
# Host and Idempotency-Key are the handler's to set; the framing headers are httpx's.
_REFUSED_HEADERS = frozenset({"host", "idempotency-key", "content-length", "transfer-encoding"})


class HttpInput(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    method: Literal["GET", "POST", "PUT", "DELETE", "HEAD"] = "GET"
    url: str
    headers: dict[str, str] = Field(default_factory=dict)
    body: JsonValue = Field(default=None, alias="json")
    save_as: str | None = Field(default=None, pattern=r"^[A-Za-z0-9._-]{1,128}$")


class ShellInput(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    argv: list[str]
    stdin: str | None = None


def describe_invalid(exc: ValidationError) -> str:
    """Field paths and messages only: the input itself may hold secrets."""
    return "; ".join(
        f"{'.'.join(str(p) for p in err['loc']) or '<root>'}: {err['msg']}"
        for err in exc.errors(include_url=False, include_input=False)
    )


def _header_problem(headers: dict[str, str]) -> str | None:
    for name, value in headers.items():
        if not _HEADER_NAME.fullmatch(name):
            return f"header name {name[:64]!r} is not a valid token"
        if name.lower() in _REFUSED_HEADERS:
            return f"header {name!r} is set by the handler and may not be supplied"
        if _HEADER_VALUE_FORBIDDEN.search(value):
            return f"header {name!r} contains NUL, CR or LF"
    return None


def _read(model: type[M], arguments: JsonObject, kind: str) -> M | str:
    try:
        return model.model_validate(arguments)
    except ValidationError as exc:
        return f"invalid {kind} input: {describe_invalid(exc)}"


def http_input(arguments: JsonObject) -> HttpInput | str:
    """The http step's input, or what is wrong with it."""
    spec = _read(HttpInput, arguments, "http")
    if isinstance(spec, str):
        return spec
    problem = _header_problem(spec.headers)
    if problem is not None:
        return problem
    if spec.save_as is not None and spec.save_as.startswith("."):
        return "save_as may not start with '.'"
    return spec


def shell_input(arguments: JsonObject) -> ShellInput | str:
    """The restricted_shell step's input, or what is wrong with it."""
    spec = _read(ShellInput, arguments, "restricted_shell")
    if isinstance(spec, str):
        return spec
    size = len((spec.stdin or "").encode("utf-8"))
    if size > MAX_STDIN_BYTES:
        return f"stdin is {size} bytes; the limit is {MAX_STDIN_BYTES}"
    return spec
