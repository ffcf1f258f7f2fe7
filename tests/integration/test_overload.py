"""Overload: a bounded queue, on SQLite and PostgreSQL.

While the queue holds ``GATEHOUSE_MAX_QUEUED`` runs, intents are refused with 503
``overloaded`` and ``Retry-After``; one submitter holding its share
(``GATEHOUSE_MAX_QUEUED_PER_SUBMITTER``) is refused with 429 while another
submitter's intents are still taken. A refused intent stores nothing; every
accepted one is there. The backlog is made by marking runs queued (no worker
could take them that fast on demand), so this module's runs are not replayed.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import require_backend
from tests.support.plans import noop_plan
from tests.support.stack import BACKENDS, Stack, running_stack

LIMITS = {"GATEHOUSE_MAX_QUEUED": "4", "GATEHOUSE_MAX_QUEUED_PER_SUBMITTER": "2"}


@pytest.fixture(scope="module", params=BACKENDS)
def stack(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Stack]:
    require_backend(request.param)
    with running_stack(request.param, tmp_path_factory.mktemp("overload"), shim_env=LIMITS) as s:
        s.tampered = True
        yield s


def _submit(stack: Stack, who: str) -> Any:
    body = {"recipe": "echo", "objective": "load", "mode": "run-plan", "plan": noop_plan(1)}
    return stack.client.post("/intent", json=body, headers=stack.auth(who))


def _hold_in_queue(stack: Stack, accepted: list[Any]) -> None:
    """Every run so far as if no worker had taken it yet. The runs just ``accepted``
    are first waited on until the worker has parked them at their cards: one it has
    not taken yet (still ``queued``) would be moved on after this write, and the
    queue would not be as full as it reads."""
    for response in accepted:
        assert response.status_code == 202, response.text
        stack.wait(str(response.json()["run_id"]), {"waiting_approval"})
    stack.execute("UPDATE runs SET status = 'queued'")


def test_a_full_queue_refuses_with_retry_after_and_stores_nothing(stack: Stack) -> None:
    _hold_in_queue(stack, [_submit(stack, "sam") for _ in range(2)])
    refused = _submit(stack, "sam")
    assert refused.status_code == 429, refused.text
    assert refused.json()["error"]["code"] == "queue_share_exceeded"
    assert refused.headers["retry-after"] == "5"
    # another submitter still gets in, until the whole queue is full
    _hold_in_queue(stack, [_submit(stack, "max") for _ in range(2)])
    full = _submit(stack, "alice")
    assert full.status_code == 503, full.text
    assert full.json()["error"]["code"] == "overloaded" and full.json()["error"]["retryable"]
    assert full.headers["retry-after"] == "5"
    assert stack.sql("SELECT COUNT(*) FROM runs")[0][0] == 4  # nothing stored for refusals
    # room again: accepted
    stack.execute("UPDATE runs SET status = 'failed'")
    assert _submit(stack, "alice").status_code == 202
