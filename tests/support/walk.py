"""Every route the app serves, asked once per method: for checks that must hold on
every answer (a header, say), so that a route added later is walked too."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from fastapi import FastAPI

from shim.api.http import served_routes

__all__ = ["Ask", "every_request"]

_PARAM = re.compile(r"\{([^}:]+)(?::[^}]*)?\}")


@dataclass(frozen=True)
class Ask:
    method: str
    path: str  # the route's template, for messages
    url: str  # with its parameters filled in


def every_request(app: FastAPI, values: Mapping[str, str]) -> Iterator[Ask]:
    """One request per (route, method) of ``app``, its path parameters taken from
    ``values`` (a name not there: ``x``), HEAD for each GET the route answers."""
    for route in served_routes(app):
        path = str(getattr(route, "path", ""))
        methods = sorted(getattr(route, "methods", None) or {"GET"})
        url = _PARAM.sub(lambda m: values.get(m.group(1), "x"), path)
        for method in methods:
            yield Ask(method, path, url)
        if "GET" in methods and "HEAD" not in methods:
            yield Ask("HEAD", path, url)
