"""Unit tests for the plan gate (policies.gate): deny by default, case by case.

Uses the shipped default tool pool and profile, and the hand-built ones in
``tests.unit.policies.gate_cases``. The property tests are in ``test_gate_properties``.
"""

from __future__ import annotations

import pytest

from contracts import (
    DriverKind,
    ErrorCode,
    GatehouseError,
    JsonObject,
    JsonValue,
    Plan,
    PlanStep,
    PolicyProfile,
    ToolPool,
)
from policies.gate import check_step, find_results, gate_plan
from tests.unit.policies.gate_cases import DEFAULT_POOL, DEFAULT_PROFILE, POOL, PROFILE
from tests.unit.policies.gate_cases import plan as _plan
from tests.unit.policies.gate_cases import step as _step


def _refused(plan: Plan, pool: ToolPool, profile: PolicyProfile, code: ErrorCode) -> GatehouseError:
    with pytest.raises(GatehouseError) as info:
        gate_plan(plan, pool, profile)
    assert info.value.code is code, info.value
    return info.value


# --- allowed plans ----------------------------------------------------------------------------


def test_default_pool_allows_a_plan_of_every_kind() -> None:
    plan = _plan(
        _step("note", "note", DriverKind.NOOP, {"message": "hello"}),
        _step("fetch", "local-http", DriverKind.HTTP, {"url": "http://127.0.0.1:8080/x.json"}),
        _step("list", "workspace-shell", DriverKind.RESTRICTED_SHELL, {"argv": ["ls", "-l"]}),
        _step("count", "workspace-shell", DriverKind.RESTRICTED_SHELL, {"argv": ["wc", "-c", "f"]}),
        _step("report", "note", DriverKind.NOOP, input_from="fetch", pointer="/json"),
    )
    gate_plan(plan, DEFAULT_POOL, DEFAULT_PROFILE)


def test_hand_built_pool_allows_a_plan() -> None:
    plan = _plan(
        _step("memo", "memo", DriverKind.NOOP, {"text": "stdout is only a word here"}),
        _step("get", "api", DriverKind.HTTP, {"url": "https://API.example.com:8443/v1/items"}),
        _step("ls", "shell", DriverKind.RESTRICTED_SHELL, {"argv": ["ls", "-l", "dir"]}),
    )
    gate_plan(plan, POOL, PROFILE)


def test_check_step_returns_the_connector() -> None:
    step = _step("ls", "shell", DriverKind.RESTRICTED_SHELL, {"argv": ["ls"]})
    assert check_step(step, step.input, POOL, PROFILE) == POOL.connector("shell")


def test_exactly_max_steps_is_allowed() -> None:
    steps = [_step(f"s{i}", "memo", DriverKind.NOOP, {}) for i in range(PROFILE.max_steps)]
    gate_plan(_plan(*steps), POOL, PROFILE)


# --- refusals ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pool", "profile"), [(DEFAULT_POOL, DEFAULT_PROFILE), (POOL, PROFILE)], ids=["default", "test"]
)
@pytest.mark.parametrize("connector_id", ["nope", "shell-extra", "note2", "local-https"])
def test_unknown_connector(pool: ToolPool, profile: PolicyProfile, connector_id: str) -> None:
    error = _refused(
        _plan(_step("s", connector_id, DriverKind.NOOP, {})),
        pool,
        profile,
        ErrorCode.UNKNOWN_CONNECTOR,
    )
    assert error.details == {"step_id": "s", "connector_id": connector_id}


@pytest.mark.parametrize(
    ("connector_id", "driver_kind"),
    [
        ("note", DriverKind.HTTP),
        ("note", DriverKind.RESTRICTED_SHELL),
        ("local-http", DriverKind.NOOP),
        ("workspace-shell", DriverKind.HTTP),
        ("workspace-shell", DriverKind.OPENCODE),
    ],
)
def test_driver_must_be_the_connectors(connector_id: str, driver_kind: DriverKind) -> None:
    step = _step("s", connector_id, driver_kind, {"url": "http://127.0.0.1/", "argv": ["ls"]})
    _refused(_plan(step), DEFAULT_POOL, DEFAULT_PROFILE, ErrorCode.DRIVER_NOT_ALLOWED)


def test_driver_must_be_allowed_by_the_profile() -> None:
    _refused(
        _plan(_step("s", "agent", DriverKind.OPENCODE, {})),
        POOL,
        PROFILE,
        ErrorCode.DRIVER_NOT_ALLOWED,
    )
    no_http = DEFAULT_PROFILE.model_copy(update={"allowed_driver_kinds": [DriverKind.NOOP]})
    step = _step("s", "local-http", DriverKind.HTTP, {"url": "http://127.0.0.1/"})
    _refused(_plan(step), DEFAULT_POOL, no_http, ErrorCode.DRIVER_NOT_ALLOWED)


def test_connector_without_limits() -> None:
    _refused(
        _plan(_step("s", "unbounded", DriverKind.NOOP, {})), POOL, PROFILE, ErrorCode.LIMITS_MISSING
    )


def test_limits_are_checked_even_for_input_from_steps() -> None:
    plan = _plan(
        _step("a", "memo", DriverKind.NOOP, {}),
        _step("b", "unbounded", DriverKind.NOOP, input_from="a"),
    )
    _refused(plan, POOL, PROFILE, ErrorCode.LIMITS_MISSING)


@pytest.mark.parametrize(
    ("pool", "profile"), [(DEFAULT_POOL, DEFAULT_PROFILE), (POOL, PROFILE)], ids=["default", "test"]
)
def test_too_many_steps(pool: ToolPool, profile: PolicyProfile) -> None:
    connector = "note" if pool is DEFAULT_POOL else "memo"
    steps = [_step(f"s{i}", connector, DriverKind.NOOP, {}) for i in range(profile.max_steps + 1)]
    error = _refused(_plan(*steps), pool, profile, ErrorCode.TOO_MANY_STEPS)
    assert error.details == {"steps": profile.max_steps + 1, "max_steps": profile.max_steps}


@pytest.mark.parametrize(
    "url",
    [
        "http://example.com/",
        "https://127.0.0.1/",
        "http://localhost/",
        "http://127.0.0.2/",
        "http://127.0.0.1.nip.io/",
        "http://user@127.0.0.1/",
        "ftp://127.0.0.1/",
        "file:///etc/passwd",
        "http://127.0.0.1/a/../../etc",
        "http://127.0.0.1/\nx",
        "",
    ],
)
def test_default_http_destination_not_allowed(url: str) -> None:
    step = _step("s", "local-http", DriverKind.HTTP, {"url": url})
    _refused(_plan(step), DEFAULT_POOL, DEFAULT_PROFILE, ErrorCode.DESTINATION_NOT_ALLOWED)


@pytest.mark.parametrize(
    "url",
    [
        "http://api.example.com/v1",
        "https://api.example.com:444/v1",
        "https://api.example.com/v2",
        "https://api.example.com/v1x",
        "https://api.example.com.evil.org/v1",
        "https://evil.org/v1",
    ],
)
def test_hand_built_http_destination_not_allowed(url: str) -> None:
    step = _step("s", "api", DriverKind.HTTP, {"url": url})
    _refused(_plan(step), POOL, PROFILE, ErrorCode.DESTINATION_NOT_ALLOWED)


@pytest.mark.parametrize("step_input", [{}, {"url": 3}, {"URL": "http://127.0.0.1/"}])
def test_http_step_needs_a_string_url(step_input: JsonObject) -> None:
    step = _step("s", "local-http", DriverKind.HTTP, step_input)
    _refused(_plan(step), DEFAULT_POOL, DEFAULT_PROFILE, ErrorCode.PLAN_INVALID)


@pytest.mark.parametrize(
    "argv",
    [
        ["rm", "-rf", "x"],
        ["sh", "-c", "ls"],
        ["bash"],
        ["/usr/bin/ls"],
        ["./ls"],
        ["ls", "/etc"],
        ["ls", "../x"],
        ["ls", "-R"],
        ["wc", "--files0-from=/etc/passwd"],
        ["echo", "a;b"],
        [],
    ],
)
def test_shell_argv_not_allowed(argv: list[str]) -> None:
    step = _step(
        "s", "workspace-shell", DriverKind.RESTRICTED_SHELL, {"argv": list[JsonValue](argv)}
    )
    _refused(_plan(step), DEFAULT_POOL, DEFAULT_PROFILE, ErrorCode.COMMAND_NOT_ALLOWED)


@pytest.mark.parametrize("step_input", [{}, {"argv": "ls -l"}, {"argv": ["ls", 1]}])
def test_shell_step_needs_an_argv_list_of_strings(step_input: JsonObject) -> None:
    step = _step("s", "workspace-shell", DriverKind.RESTRICTED_SHELL, step_input)
    _refused(_plan(step), DEFAULT_POOL, DEFAULT_PROFILE, ErrorCode.PLAN_INVALID)


@pytest.mark.parametrize(
    ("step_input", "pointer"),
    [
        ({"stdout": "done"}, "/stdout"),
        ({"message": "x", "Exit_Code": 0}, "/Exit_Code"),
        ({"a": {"b": {"STDERR": ""}}}, "/a/b/STDERR"),
        ({"a": [1, {"returncode": 0}]}, "/a/1/returncode"),
        ({"a": [[{"x": [{"Tool_Results": []}]}]]}, "/a/0/0/x/0/Tool_Results"),
        ({"status_code": 200}, "/status_code"),
        ({"nested": {"execution_result": None}}, "/nested/execution_result"),
    ],
)
def test_plan_containing_results_is_refused(step_input: JsonObject, pointer: str) -> None:
    step = _step("s", "note", DriverKind.NOOP, step_input)
    error = _refused(_plan(step), DEFAULT_POOL, DEFAULT_PROFILE, ErrorCode.PLAN_CONTAINS_RESULTS)
    assert error.details["pointer"] == pointer


def test_results_are_refused_before_the_command_check() -> None:
    step = _step(
        "s",
        "workspace-shell",
        DriverKind.RESTRICTED_SHELL,
        {"argv": ["ls"], "meta": [{"stdout": "x"}]},
    )
    _refused(_plan(step), DEFAULT_POOL, DEFAULT_PROFILE, ErrorCode.PLAN_CONTAINS_RESULTS)


def test_result_words_as_values_are_not_results() -> None:
    step = _step("s", "note", DriverKind.NOOP, {"message": "stdout", "list": ["exit_code"]})
    gate_plan(_plan(step), DEFAULT_POOL, DEFAULT_PROFILE)


def test_the_first_refused_step_decides() -> None:
    plan = _plan(
        _step("ok", "note", DriverKind.NOOP, {}),
        _step("ghost", "nope", DriverKind.NOOP, {}),
        _step("bad", "workspace-shell", DriverKind.RESTRICTED_SHELL, {"argv": ["rm"]}),
    )
    error = _refused(plan, DEFAULT_POOL, DEFAULT_PROFILE, ErrorCode.UNKNOWN_CONNECTOR)
    assert error.details["step_id"] == "ghost"


# --- input_from: checked at compile time without input, again once resolved ----------------


def test_input_from_step_passes_compile_time_but_resolved_input_is_checked() -> None:
    # An untainted source (a noop note) may fill a shell step's whole input; the
    # resolved input is checked again before the step runs.
    shell = _step("run", "workspace-shell", DriverKind.RESTRICTED_SHELL, input_from="note")
    http = _step("post", "local-http", DriverKind.HTTP, input_from="note", pointer="/next")
    plan = _plan(_step("note", "note", DriverKind.NOOP, {"text": "x"}), shell, http)
    gate_plan(plan, DEFAULT_POOL, DEFAULT_PROFILE)
    assert check_step(shell, None, DEFAULT_POOL, DEFAULT_PROFILE).connector_id == "workspace-shell"

    def code_of(step: PlanStep, resolved: JsonObject) -> ErrorCode:
        with pytest.raises(GatehouseError) as info:
            check_step(step, resolved, DEFAULT_POOL, DEFAULT_PROFILE)
        return info.value.code

    assert code_of(shell, {"argv": ["rm", "-rf", "x"]}) is ErrorCode.COMMAND_NOT_ALLOWED
    assert code_of(shell, {"argv": ["ls"], "stdout": "x"}) is ErrorCode.PLAN_CONTAINS_RESULTS
    assert code_of(shell, {"json": {"argv": ["ls"]}}) is ErrorCode.PLAN_INVALID
    assert code_of(http, {"url": "http://169.254.169.254/"}) is ErrorCode.DESTINATION_NOT_ALLOWED
    assert check_step(shell, {"argv": ["ls", "-l"]}, DEFAULT_POOL, DEFAULT_PROFILE)
    assert check_step(http, {"url": "http://127.0.0.1:9/ok"}, DEFAULT_POOL, DEFAULT_PROFILE)


def test_an_http_body_cannot_choose_a_program_or_a_destination() -> None:
    fetch = _step("fetch", "local-http", DriverKind.HTTP, {"url": "http://127.0.0.1:9/argv"})
    for step in (
        _step("run", "workspace-shell", DriverKind.RESTRICTED_SHELL, input_from="fetch"),
        _step("post", "local-http", DriverKind.HTTP, input_from="fetch", pointer="/next"),
    ):
        with pytest.raises(GatehouseError) as info:
            gate_plan(_plan(fetch, step), DEFAULT_POOL, DEFAULT_PROFILE)
        assert info.value.code is ErrorCode.TAINTED_INPUT
        assert info.value.details["step_id"] == step.step_id


# --- find_results -----------------------------------------------------------------------------


@pytest.mark.parametrize("value", [None, 1, "stdout", [], {}, ["stdout", {"ok": "exit_code"}]])
def test_find_results_none(value: JsonValue) -> None:
    assert find_results(value) is None


def test_find_results_pointer_escapes_keys() -> None:
    assert find_results({"a/b": {"c~d": {"stdout": ""}}}) == "/a~1b/c~0d/stdout"


# --- what the step's handler would refuse, refused at the gate ------------------------------

_URL = "https://api.example.com/v1/items"


@pytest.mark.parametrize(
    ("connector_id", "driver_kind", "step_input", "said"),
    [
        ("api", DriverKind.HTTP, {"url": _URL, "save_as": "../x"}, "save_as"),
        ("api", DriverKind.HTTP, {"url": _URL, "save_as": ".hidden"}, "may not start with '.'"),
        ("api", DriverKind.HTTP, {"url": _URL, "headers": {"Host": "evil"}}, "set by the handler"),
        ("api", DriverKind.HTTP, {"url": _URL, "headers": {"X-A": "a\r\nb"}}, "NUL, CR or LF"),
        ("api", DriverKind.HTTP, {"url": _URL, "method": "PATCH"}, "method"),
        ("api", DriverKind.HTTP, {"url": _URL, "timeout": 5}, "timeout"),
        ("shell", DriverKind.RESTRICTED_SHELL, {"argv": ["ls"], "stdin": "x" * 65537}, "stdin"),
        ("shell", DriverKind.RESTRICTED_SHELL, {"argv": ["ls"], "env": {}}, "env"),
    ],
)
def test_what_the_handler_would_refuse_is_refused_before_approval(
    connector_id: str, driver_kind: DriverKind, step_input: JsonObject, said: str
) -> None:
    refused = _refused(
        _plan(_step("s1", connector_id, driver_kind, step_input)),
        POOL,
        PROFILE,
        ErrorCode.PLAN_INVALID,
    )
    assert said in refused.message and "'s1'" in refused.message, refused.message


def test_stdin_at_its_limit_passes_the_gate() -> None:
    ok = _step("s1", "shell", DriverKind.RESTRICTED_SHELL, {"argv": ["ls"], "stdin": "x" * 65536})
    gate_plan(_plan(ok), POOL, PROFILE)
