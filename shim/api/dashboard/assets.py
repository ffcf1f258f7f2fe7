"""``/dashboard/static/{name}``: the dashboard's script and style sheet (no session needed)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter
from fastapi import Path as PathParam
from fastapi.responses import FileResponse, Response

from contracts import ErrorCode, GatehouseError
from shim.api.dashboard._pages import HEADERS, HERE

# A plain route, not a page: an unknown file is answered as the API answers it.
router = APIRouter()

_STATIC = {"live.js": "text/javascript", "style.css": "text/css"}


@router.get("/dashboard/static/{name}")
def dashboard_static(
    name: Annotated[str, PathParam(pattern=r"^[a-z]+\.(js|css)$")],
) -> Response:
    if name not in _STATIC:
        raise GatehouseError(ErrorCode.NOT_FOUND, f"no dashboard file {name!r}")
    return FileResponse(HERE / "static" / name, media_type=_STATIC[name], headers=HEADERS)
