"""The Python client for the Gatehouse API: :class:`Client` (blocking) and
:class:`AsyncClient` (asyncio), with the same methods.

Answers are the contract models the shim answers with (``contracts``); a refusal
is an :class:`ApiError` carrying the closed :class:`~contracts.ErrorCode`; a busy
shim's 429/503 with ``Retry-After`` is sent again when ``retry_for`` allows::

    from shim.client import Client

    with Client.from_env() as api:  # GATEHOUSE_URL, or this folder's `gatehouse up`
        run = api.submit({"recipe": "echo", "objective": "hello", "mode": "run-plan",
                          "plan": plan})
        card = api.wait(run.run_id, {"waiting_approval"}, timeout=60)
        api.approve(run.run_id, card.plan_digest)
        done = api.wait(run.run_id, {"succeeded", "failed"}, timeout=120)

A wait returns once the run reaches one of the statuses asked for, raises
:class:`RunEndedError` at once when it has ended otherwise, and rides out a shim
restart (asked again until it answers, within the wait's time). The CLI
(``gatehouse``) is built on :class:`Client`.
"""

from __future__ import annotations

from contracts import ErrorCode
from shim.client._async import AsyncClient
from shim.client._calls import ArtifactRef, Call, Calls
from shim.client._errors import ApiError, RunEndedError
from shim.client._local import DEFAULT_URL, shim_url
from shim.client._sync import Client
from shim.client._transport import KEEPALIVE

__all__ = [
    "DEFAULT_URL",
    "KEEPALIVE",
    "ApiError",
    "ArtifactRef",
    "AsyncClient",
    "Call",
    "Calls",
    "Client",
    "ErrorCode",
    "RunEndedError",
    "shim_url",
]
