"""``GET /runs/{run_id}/episodes``: a run's MOVA episodes, with which text is for whom."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends

from contracts import EPISODES_CHANNELS, EpisodeView, Role
from shim.api.deps import ServiceDep, require
from shim.api.http import Answer
from shim.api.openapi import TEXT_CHANNELS, Listing, Op, documented
from shim.api.params import RunId
from shim.api.services import reads
from shim.tokens import Identity

router = APIRouter()


@router.get(
    "/runs/{run_id}/episodes",
    openapi_extra=documented(
        Op(
            answer=Listing("episodes", EpisodeView, more={"text_channels": TEXT_CHANNELS}),
            errors=(404, 422),
        )
    ),
)
def get_episodes(
    caller: Annotated[Identity, Depends(require(Role.OPERATOR))],
    service: ServiceDep,
    run_id: RunId,
) -> Answer:
    found = reads.episodes(service, run_id)
    return Answer(
        {
            "episodes": [e.model_dump(mode="json") for e in found],
            "text_channels": {k: v.value for k, v in EPISODES_CHANNELS.items()},
        }
    )
