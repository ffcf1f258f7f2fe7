"""A client's wait never hangs: on a run that has ended otherwise it raises at once,
and it rides out a shim that goes away and comes back (``shim.client``, blocking and
asyncio, against a served shim behind a loopback proxy). Both databases."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import httpx
import pytest

from contracts import Role
from shim.client import AsyncClient, Client, RunEndedError
from shim.tokens import add_token
from tests.integration.test_approval import decide, waiting_run
from tests.support.served import ServedShim
from tests.support.stack import Stack
from tests.support.tcp_proxy import TcpProxy


def _token(stack: Stack, name: str) -> str:
    return add_token(stack.client.people.file, name, [Role.SUBMITTER, Role.OPERATOR])


def test_a_wait_for_what_a_finished_run_cannot_become_ends_at_once(stack: Stack) -> None:
    """Waiting for ``waiting_approval`` on a run that succeeded (the client example run
    twice with one key did this, and slept its full minute before a TimeoutError)."""
    run_id = stack.finished_run(1, "already done")
    token = _token(stack, "waits-once")
    with ServedShim(stack.database_url, stack.client.people.file) as url:
        with Client(url, token) as api, pytest.raises(RunEndedError) as ended:
            api.wait(run_id, {"waiting_approval"}, timeout=300)
        assert ended.value.view.status.value == "succeeded"

        async def waits() -> RunEndedError:
            async with AsyncClient(url, token) as api:
                try:
                    await api.wait(run_id, {"waiting_approval", "running"}, timeout=300)
                except RunEndedError as exc:
                    return exc
            raise AssertionError("the wait returned")

        assert asyncio.run(waits()).view.run_id == run_id


@pytest.mark.parametrize("kind", ["blocking", "asyncio"])
def test_a_wait_rides_out_a_shim_restart(stack: Stack, kind: str) -> None:
    run_id, digest = waiting_run(stack)
    token = _token(stack, f"waits-through-{kind}")
    people = stack.client.people.file
    first = ServedShim(stack.database_url, people)
    first_url = first.__enter__()
    port = int(first_url.rsplit(":", 1)[1])
    got: dict[str, Any] = {}
    with TcpProxy("127.0.0.1", port) as proxy:
        url = f"http://127.0.0.1:{proxy.port}"

        def wait() -> None:
            try:
                if kind == "blocking":
                    with Client(url, token) as api:
                        got["view"] = api.wait(run_id, {"succeeded", "failed"}, timeout=120)
                else:

                    async def waits() -> Any:
                        async with AsyncClient(url, token) as api:
                            return await api.wait(run_id, {"succeeded", "failed"}, timeout=120)

                    got["view"] = asyncio.run(waits())
            except BaseException as exc:
                got["error"] = exc

        waiter = threading.Thread(target=wait)
        waiter.start()
        first.__exit__()  # the shim goes away (as `gatehouse up` restarts it)
        while proxy.stats().upstream_failed < 2 and waiter.is_alive():
            threading.Event().wait(0.1)  # the wait has tried, and found nobody
        # decided meanwhile, elsewhere; then the shim comes back on another port
        assert decide(stack, "approve", run_id, digest).status_code == 200
        with ServedShim(stack.database_url, people) as second_url:
            proxy.upstream = ("127.0.0.1", int(second_url.rsplit(":", 1)[1]))
            waiter.join(120)
    assert "error" not in got, got
    assert got["view"].status.value == "succeeded"
    assert proxy.stats().upstream_failed >= 2


def test_a_wait_open_when_its_shim_stops_ends_as_a_timeout(stack: Stack) -> None:
    """A shim's server cancels the requests still open once its graceful shutdown's
    grace (5 s here) is over; a long wait is one. It ends as a timeout (the client asks
    again, of the next shim), never as an error 500."""
    run_id, _digest = waiting_run(stack)
    token = _token(stack, "waits-at-stop")
    served = ServedShim(stack.database_url, stack.client.people.file)
    url = served.__enter__()
    got: dict[str, Any] = {}

    def wait() -> None:
        with httpx.Client(base_url=url, timeout=60) as http:
            got["answer"] = http.get(
                f"/runs/{run_id}/wait",
                params={"until": "succeeded", "timeout_s": 60},
                headers={"Authorization": f"Bearer {token}"},
            )

    waiter = threading.Thread(target=wait)
    waiter.start()
    threading.Event().wait(0.5)  # the wait is open
    served.__exit__()
    waiter.join(30)
    answer = got["answer"]
    assert answer.status_code == 200, answer.text
    assert answer.headers["Gatehouse-Wait"] == "timeout"
    assert answer.json()["status"] == "waiting_approval"
