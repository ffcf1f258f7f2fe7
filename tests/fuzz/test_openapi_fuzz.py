"""API fuzzing: Schemathesis against the shim's own OpenAPI document.

The document is loaded from the running app (``/openapi.json``), so it is the
one clients get. Every operation is exercised with bodies generated from the
documented schemas (so cases reach past validation) and with broken ones, by
each role in turn (a submitter, an approver, an operator, and nobody), against
a live worker on a fresh SQLite database: submitted intents really run.

Every check Schemathesis has is on: no answer >= 500, every status and content
type documented, every body matching its documented schema, required headers
present. Counts are printed at the end (``-s``) and recorded in
docs/security.md.
"""

from __future__ import annotations

import collections
import json
import os
from collections.abc import Iterator
from typing import Any

import hypothesis
import hypothesis.errors
import hypothesis.stateful
import pytest
import schemathesis
import schemathesis.checks
from fastapi.routing import APIRoute
from schemathesis import Case
from schemathesis.core.result import Err

from contracts import JsonObject
from shim.api import dashboard, routes, slack
from tests.support.stack import Stack, running_stack
from worker.scripted_model import ScriptedModel, load_script

EXAMPLES = 25
# A schema-valid body can still be refused by the policy gate (an unknown
# connector, a destination not allowed: 422 by design), so "valid data is
# accepted" does not hold for this API; every other check does.
EXCLUDED = [schemathesis.checks.positive_data_acceptance]
ROLES = ("sam", "ann", "olga", None)  # submitter, approver, operator, no token


@schemathesis.python.constants
def _route_handlers() -> list[object]:
    """The shim's handlers, for Schemathesis to harvest literal values from (recipe ids,
    patterns, limits) and generate with: it reads the handlers off ``app.routes``, where
    FastAPI (0.137 and later) keeps each included router whole, so it finds none there."""
    return [
        route.endpoint
        for router in (*routes.ROUTERS, *dashboard.ROUTERS, *slack.ROUTERS)
        for route in router.routes
        if isinstance(route, APIRoute)
    ]


@pytest.fixture(scope="module")
def fuzz_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    # A whole deployment: a model planner too (a scripted one answering with a note,
    # and with a report when asked to explain a run), so that a schema-valid intent
    # for any recipe is accepted and runs, and an explain is answered.
    plan: JsonObject = {"schema_id": "env.mova_agent_plan_v1", "objective": "fuzz",
            "steps": [{"step_id": "note", "verb": "note", "connector_id": "note",
                       "driver_kind": "noop", "input": {"text": "fuzzed"}}]}  # fmt: skip
    report: JsonObject = {
        "headline": "fuzzed",
        "summary": "A fuzzed run.",
        "steps": [],
        "concerns": [],
    }
    script: JsonObject = {"turns": [{"match": "Evidence of run", "replies": [{"content": report}]},
                        {"replies": [{"content": plan}]}]}  # fmt: skip
    # Decisions from Slack set up too, so its route is fuzzed past "not set up here".
    tmp = tmp_path_factory.mktemp("fuzz")
    os.environ["GATEHOUSE_FUZZ_SLACK_SECRET"] = "fuzz-slack-signing-secret"
    slack = tmp / "slack.json"
    slack.write_text(json.dumps({"signing_secret_env": "GATEHOUSE_FUZZ_SLACK_SECRET",
                                 "users": {"U0ANN": "ann"}}))  # fmt: skip
    with ScriptedModel(load_script(script)) as model:
        env = {"GATEHOUSE_MODEL_BASE_URL": model.base_url, "GATEHOUSE_MODEL_NAME": "scripted"}
        shim_env = {"GATEHOUSE_SLACK": str(slack)}
        with running_stack("sqlite", tmp, env, shim_env=shim_env) as stack:
            stack.tampered = True  # fuzzed runs are not replayed at teardown: noise
            yield stack


Operation = schemathesis.APIOperation[Any, Any, Any, Any]


def _operations(stack: Stack) -> list[Operation]:
    api = schemathesis.openapi.from_asgi("/openapi.json", stack.client.app)
    found: list[Operation] = []
    for result in api.get_all_operations():
        if isinstance(result, Err):  # the document itself is broken: say where
            raise AssertionError(f"/openapi.json: {result.err()}")
        found.append(result.ok())
    return found


class Fuzzing:
    """The fuzzing of one module's stack, each part done once, whichever test asks
    first: so every test stands alone and the tests run in any order."""

    def __init__(self, stack: Stack) -> None:
        self.stack = stack
        self.seen: collections.Counter[str] = collections.Counter()
        self._modes: dict[schemathesis.GenerationMode, list[str]] = {}
        self._sequences: list[BaseException | None] = []  # empty: not run yet

    def mode(self, mode: schemathesis.GenerationMode) -> list[str]:
        """Every operation with cases generated in ``mode``: one failure report each."""
        if mode not in self._modes:
            self._modes[mode] = self._every_operation(mode)
        return self._modes[mode]

    def sequences(self) -> BaseException | None:
        """The linked sequences: what failed, or None."""
        if not self._sequences:
            try:
                self._linked_sequences()
                self._sequences.append(None)
            except (Exception, BaseExceptionGroup) as exc:
                self._sequences.append(exc)
        return self._sequences[0]

    def _every_operation(self, mode: schemathesis.GenerationMode) -> list[str]:
        failures: list[str] = []
        stack, seen = self.stack, self.seen
        for operation in _operations(stack):

            @hypothesis.given(case=operation.as_strategy(generation_mode=mode))
            @hypothesis.settings(
                max_examples=EXAMPLES,
                deadline=None,
                derandomize=True,
                database=None,
                suppress_health_check=list(hypothesis.HealthCheck),
            )
            def exercise(case: Case[Any]) -> None:
                if case.path == "/runs/{run_id}/wait" and isinstance(case.query, dict):
                    case.query["timeout_s"] = 0.01  # a long poll would only make the fuzzer wait
                for who in ROLES:
                    headers = stack.client.people.auth(who) if who else {}
                    response = case.call_and_validate(headers=headers, excluded_checks=EXCLUDED)
                    seen[f"{case.method} {case.path} {response.status_code}"] += 1

            try:
                exercise()
            except hypothesis.errors.Unsatisfiable:
                continue  # nothing to break: no parameter, no body (/healthz, negative mode)
            except (Exception, BaseExceptionGroup) as exc:  # one report per operation, go on
                failures.append(f"{operation.label} ({mode.value}): {exc}"[:3000])
        return failures

    def _linked_sequences(self) -> None:
        api = schemathesis.openapi.from_asgi("/openapi.json", self.stack.client.app)
        people, seen = self.stack.client.people, self.seen

        class Sequences(api.as_state_machine()):  # type: ignore[misc]  # built at run time
            def get_call_kwargs(self, case: Case[Any]) -> dict[str, object]:
                deciding = case.path in ("/approve/{run_id}", "/reject/{run_id}")
                operator = "/ledger" in case.path or "/episodes" in case.path
                who = "ann" if deciding else "olga" if operator else "sam"
                return {"headers": people.auth(who)}

            def validate_response(self, response: Any, case: Case[Any], **kwargs: Any) -> None:
                seen[f"{case.method} {case.path} {response.status_code}"] += 1
                case.validate_response(response, excluded_checks=EXCLUDED)

        hypothesis.stateful.run_state_machine_as_test(
            Sequences,
            settings=hypothesis.settings(
                max_examples=EXAMPLES,
                stateful_step_count=6,
                deadline=None,
                derandomize=True,
                database=None,
                suppress_health_check=list(hypothesis.HealthCheck),
            ),
        )


@pytest.fixture(scope="module")
def fuzzing(fuzz_stack: Stack) -> Fuzzing:
    return Fuzzing(fuzz_stack)


@pytest.mark.parametrize("mode", list(schemathesis.GenerationMode), ids=lambda m: m.value)
def test_every_operation_answers_as_documented(
    fuzzing: Fuzzing, mode: schemathesis.GenerationMode
) -> None:
    failures = fuzzing.mode(mode)
    assert failures == [], "\n\n".join(failures)


def test_linked_sequences_answer_as_documented(fuzzing: Fuzzing) -> None:
    """Stateful: follow the document's links (an accepted intent to its run, ledger,
    episodes and cancel; a run's plan card to an approval, a rejection, a verify),
    submitting as sam and deciding as ann, every answer checked as above."""
    failed = fuzzing.sequences()
    if failed is not None:
        raise failed


def test_the_counts(fuzzing: Fuzzing) -> None:
    """What the fuzzer did in all (operations, cases, statuses), printed; fuzzes first
    whatever the tests before it did not (selected alone, it does it all)."""
    for mode in schemathesis.GenerationMode:
        fuzzing.mode(mode)
    fuzzing.sequences()
    seen = fuzzing.seen
    operations = {k.rsplit(" ", 1)[0] for k in seen}
    statuses: collections.Counter[str] = collections.Counter()
    for key, n in seen.items():
        statuses[key.rsplit(" ", 1)[1]] += n
    print(
        f"\nfuzz: {len(operations)} operations, {sum(seen.values())} requests,"
        f" statuses {dict(sorted(statuses.items()))}"
    )
    assert len(operations) >= 25
    assert not any(int(s) >= 500 for s in statuses)
