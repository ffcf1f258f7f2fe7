"""The Python client against answers scripted with httpx's mock transport: what it
sends, how it reads a refusal (the closed code enum), when it sends again, and that
the blocking and the asyncio client wait for a run the same way."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable

import httpx
import pytest

from shim.client import ApiError, AsyncClient, Client, ErrorCode

RUN = "run_" + "ab" * 16
DIGEST = "0" * 64
Handler = Callable[[httpx.Request], httpx.Response]


def view(status: str) -> dict[str, object]:
    return {
        "run_id": RUN,
        "intent_id": "int_1",
        "status": status,
        "phase": "plan",
        "recipe": "echo",
        "mode": "run-plan",
        "objective": "o",
        "submitted_by": "sam",
        "policy_profile": "default",
        "tool_pool": "default",
        "plan_digest": DIGEST,
        "error_code": None,
        "error_message": None,
        "created_at": "2026-11-26T00:00:00+00:00",
        "updated_at": "2026-11-26T00:00:00+00:00",
        "plan_card": None,
        "approvals": [],
        "steps": [],
        "links": {},
    }


def sync_client(handler: Handler, **kwargs: object) -> Client:
    api = Client("http://shim", "tok", **kwargs)  # type: ignore[arg-type]
    api._http = httpx.Client(base_url="http://shim", transport=httpx.MockTransport(handler))
    return api


def async_client(handler: Handler, **kwargs: object) -> AsyncClient:
    api = AsyncClient("http://shim", "tok", **kwargs)  # type: ignore[arg-type]
    api._http = httpx.AsyncClient(base_url="http://shim", transport=httpx.MockTransport(handler))
    return api


def refusal(status: int, code: str, after: str | None = None) -> httpx.Response:
    headers = {"Retry-After": after} if after else {}
    body = {"error": {"code": code, "message": "no", "retryable": False, "details": {"x": 1}}}
    return httpx.Response(status, json=body, headers=headers)


def test_a_refusal_carries_the_closed_code_and_whether_to_retry() -> None:
    api = sync_client(lambda r: refusal(409, "plan_tampered"))
    with pytest.raises(ApiError) as caught:
        api.approve(RUN, DIGEST)
    assert caught.value.error_code is ErrorCode.PLAN_TAMPERED
    assert (caught.value.status, caught.value.code, caught.value.retryable) == (
        409,
        "plan_tampered",
        False,
    )
    assert caught.value.details == {"x": 1}


def test_an_answer_no_gatehouse_code_names_is_kept_as_said() -> None:
    api = sync_client(lambda r: httpx.Response(502, text="<html>bad gateway</html>"))
    with pytest.raises(ApiError) as caught:
        api.run(RUN)
    assert caught.value.error_code is None
    assert caught.value.code == "unknown"
    assert caught.value.retryable  # a gateway's 502 may pass


def test_a_busy_shim_is_asked_again_after_the_wait_it_names() -> None:
    answers = [refusal(429, "rate_limited", "0"), refusal(503, "overloaded", "0")]
    seen: list[str] = []

    def handler(r: httpx.Request) -> httpx.Response:
        seen.append(r.headers.get("idempotency-key", ""))
        accepted = {"run_id": RUN, "intent_id": "int_1", "status": "queued", "links": {}}
        return answers.pop(0) if answers else httpx.Response(202, json=accepted)

    notices: list[str] = []
    api = sync_client(handler, retry_for=5.0, notice=notices.append)
    accepted = api.submit({"recipe": "echo"}, idempotency_key="k1")
    assert accepted.run_id == RUN
    assert seen == ["k1", "k1", "k1"]
    assert [n.split(":")[0] for n in notices] == [
        "the shim answered 429 rate_limited",
        "the shim answered 503 overloaded",
    ]


def test_without_retry_for_a_busy_shim_is_an_error_with_its_wait() -> None:
    api = sync_client(lambda r: refusal(503, "overloaded", "7"))
    with pytest.raises(ApiError) as caught:
        api.submit({"recipe": "echo"})
    assert caught.value.error_code is ErrorCode.OVERLOADED
    assert caught.value.retry_after == 7.0
    assert caught.value.retryable


def test_a_decision_names_the_digest_it_approves() -> None:
    sent: list[tuple[str, object]] = []

    def handler(r: httpx.Request) -> httpx.Response:
        sent.append((r.url.path, json.loads(r.content)))
        return httpx.Response(200, json={
            "run_id": RUN, "plan_digest": DIGEST, "decision": "rejected",
            "decided_by": "ann", "recorded": True,
        })  # fmt: skip

    decided = sync_client(handler).reject(RUN, DIGEST, "not today")
    assert (decided.decision, decided.decided_by) == ("rejected", "ann")
    assert sent == [(f"/reject/{RUN}", {"plan_digest": DIGEST, "comment": "not today"})]


def _waited(status_after: list[str]) -> Handler:
    def handler(r: httpx.Request) -> httpx.Response:
        if r.url.path.endswith("/wait"):
            assert "waiting_approval" not in r.url.params["until"].split(",")
            return httpx.Response(200, json=view(status_after.pop(0)))
        return httpx.Response(200, json=view("waiting_approval"))

    return handler


def test_the_blocking_client_waits_through_long_polls() -> None:
    polled: list[str] = []
    api = sync_client(_waited(["waiting_approval", "running"]))
    done = api.wait(RUN, {"running"}, timeout=30, on_poll=lambda v: polled.append(v.status))
    assert done.status == "running"
    assert polled == ["waiting_approval", "waiting_approval", "running"]


def test_the_async_client_waits_the_same_way() -> None:
    polled: list[str] = []

    async def go() -> str:
        async with async_client(_waited(["waiting_approval", "running"])) as api:
            done = await api.wait(
                RUN, {"running"}, timeout=30, on_poll=lambda v: polled.append(v.status)
            )
            return done.status

    assert asyncio.run(go()) == "running"
    assert polled == ["waiting_approval", "waiting_approval", "running"]


def test_the_async_client_reads_refusals_and_retries_like_the_blocking_one() -> None:
    answers = [refusal(429, "rate_limited", "0")]

    def handler(r: httpx.Request) -> httpx.Response:
        return answers.pop(0) if answers else refusal(404, "run_not_found")

    async def go() -> ApiError:
        async with async_client(handler, retry_for=5.0) as api:
            with pytest.raises(ApiError) as caught:
                await api.cancel(RUN, "because")
            return caught.value

    err = asyncio.run(go())
    assert err.status == 404 and err.code == "run_not_found"
    assert err.error_code is ErrorCode("run_not_found")


def test_a_redirect_is_never_taken_for_an_answer() -> None:
    api = sync_client(lambda r: httpx.Response(307, headers={"location": "/runs"}))
    with pytest.raises(ApiError) as caught:
        api.run(RUN)
    assert caught.value.code == "unexpected_redirect" and caught.value.error_code is None
