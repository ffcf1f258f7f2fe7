"""``GET /security-events``: refused requests and refusals inside runs, newest first."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query

from contracts import SECURITY_EVENTS_CHANNELS, Role
from shim.api.deps import ServiceDep, require
from shim.api.http import Answer
from shim.api.openapi import TEXT_CHANNELS, Listing, Op, documented
from shim.api.services import reads
from shim.tokens import Identity

router = APIRouter()


@router.get(
    "/security-events",
    openapi_extra=documented(
        Op(answer=Listing("security_events", more={"text_channels": TEXT_CHANNELS}), errors=(422,))
    ),
)
def get_security_events(
    caller: Annotated[Identity, Depends(require(Role.OPERATOR))],
    service: ServiceDep,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> Answer:
    return Answer(
        {
            "security_events": reads.security_events(service, limit),
            "text_channels": {k: v.value for k, v in SECURITY_EVENTS_CHANNELS.items()},
        }
    )
