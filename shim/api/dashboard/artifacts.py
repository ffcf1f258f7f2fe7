"""``/dashboard/artifacts/{sha256}``: an artifact's bytes as a download (operators)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends
from fastapi.responses import Response
from starlette.concurrency import run_in_threadpool

from contracts import Role
from shim.api.dashboard._pages import HEADERS, PageRoute, viewer
from shim.api.deps import ServiceDep
from shim.api.params import Sha256
from shim.api.services import reads
from shim.tokens import Identity

router = APIRouter(route_class=PageRoute)


@router.get("/dashboard/artifacts/{sha256}")
async def artifact_download(
    me: Annotated[Identity, Depends(viewer(Role.OPERATOR))],
    service: ServiceDep,
    sha256: Sha256,
) -> Response:
    media, content = await run_in_threadpool(reads.artifact, service, sha256)
    # a download, never a page of this origin: tool output is not trusted markup
    return Response(content, media_type="application/octet-stream", headers={
        **HEADERS, "Content-Disposition": f'attachment; filename="{sha256}"',
        "Gatehouse-Media-Type": media})  # fmt: skip
