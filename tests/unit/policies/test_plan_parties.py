"""Who may not decide on a plan, and whose approvals count toward its quorum
(``policies.quorum.parties`` and ``counted``), over every kind of chain: a plan
first submitted, and one that came through edits and forks, under a profile with
four-eyes and one without. The CLI card names the authors of an edited plan."""

from __future__ import annotations

import io
import itertools

import pytest
from rich.console import Console

from contracts import JsonValue, PlanAuthor, RunView
from policies import catalog
from policies.quorum import counted, parties
from shim.cli.run_card import run_card

_PARTS = ("edited", "forked")


def _chain(parts: tuple[str, ...]) -> list[PlanAuthor]:
    first = PlanAuthor(name="sue", part="submitted", run_id="run_0")
    return [first] + [
        PlanAuthor.model_validate({"name": f"p{i}", "part": part, "run_id": f"run_{i}"})
        for i, part in enumerate(parts, 1)
    ]


CHAINS = [c for n in range(4) for c in itertools.product(_PARTS, repeat=n)]


@pytest.mark.parametrize("four_eyes", [True, False])
@pytest.mark.parametrize("links", CHAINS, ids=lambda c: "-".join(c) or "first")
def test_every_author_of_a_derived_plan_is_a_party(links: tuple[str, ...], four_eyes: bool) -> None:
    profile = catalog.profile("default").model
    profile = profile.model_copy(
        update={"approval": profile.approval.model_copy(update={"four_eyes": four_eyes})}
    )
    authors = _chain(links)
    barred = parties(profile, "sue", authors)
    if links:  # whatever the profile says
        assert barred == {a.name for a in authors}
    else:
        assert barred == ({"sue"} if four_eyes else set())
    assert "outsider" not in barred
    on_record = ["outsider", *[a.name for a in authors], "outsider", "other"]
    assert counted(on_record, barred) == [
        n for n in ("outsider", "sue", "other") if n not in barred
    ]


def _view(authors: list[PlanAuthor]) -> RunView:
    step: dict[str, JsonValue] = {"step_id": "s1", "verb": "note", "connector_id": "note",
                                  "driver_kind": "noop", "input": {"n": 1}}  # fmt: skip
    body: dict[str, JsonValue] = {
        "run_id": "run_3", "intent_id": "int_1", "recipe": "echo", "objective": "o",
        "mode": "run-plan", "status": "waiting_approval", "phase": "approval",
        "submitted_by": "sue", "policy_profile": "default", "tool_pool": "default",
        "plan_digest": "a" * 64, "error_code": None, "error_message": None,
        "created_at": "2026-01-01T00:00:00.000Z", "updated_at": "2026-01-01T00:00:01.000Z",
        "plan_card": {"plan": {"objective": "o", "steps": [step]}, "plan_digest": "a" * 64,
                      "status": "waiting_input", "created_at": "2026-01-01T00:00:01.000Z"},
        "approvals": [], "steps": [], "links": {},
        "plan_authors": [a.model_dump(mode="json") for a in authors],
    }  # fmt: skip
    return RunView.model_validate(body)


def _printed(view: RunView) -> str:
    buffer = io.StringIO()
    out = Console(file=buffer, width=300)
    for table in run_card(view):
        out.print(table)
    return buffer.getvalue()


@pytest.mark.parametrize("links", CHAINS, ids=lambda c: "-".join(c) or "first")
def test_the_cli_card_names_who_wrote_an_edited_plan(links: tuple[str, ...]) -> None:
    authors = _chain(links)
    text = _printed(_view(authors))
    if links:
        assert "written by" in text
        assert all(f"{a.name} ({a.part})" in text for a in authors), text
    else:  # a plan as first submitted: "submitted by" says it all
        assert "written by" not in text
