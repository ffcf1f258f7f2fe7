"""Unit tests for the plan gate (policies.gate): deny by default.

Uses the shipped default tool pool and profile, and hand-built ones that
exercise what the defaults cannot (a connector without limits, a driver kind
the profile does not allow, an https destination with ports and a prefix).
The property tests check the gate against an independent oracle: arbitrary
plans never pass unless every step is allowed.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlsplit

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contracts import (
    CommandRule,
    Connector,
    Destination,
    DriverKind,
    ErrorCode,
    GatehouseError,
    JsonObject,
    JsonValue,
    Limits,
    Plan,
    PlanStep,
    PolicyProfile,
    ToolPool,
)
from policies import catalog
from policies.gate import RESULT_KEYS, check_step, find_results, gate_plan

DEFAULT_POOL = catalog.tool_pool("default").model
DEFAULT_PROFILE = catalog.profile("default").model

LIMITS = Limits(timeout_s=5, max_output_bytes=4096)
POOL = ToolPool(
    tool_pool_id="test",
    version="1",
    description="hand-built pool for the gate tests",
    connectors=[
        Connector(
            connector_id="memo", driver_kind=DriverKind.NOOP, description="memo", limits=LIMITS
        ),
        Connector(
            connector_id="api",
            driver_kind=DriverKind.HTTP,
            description="one public API",
            limits=LIMITS,
            destinations=[
                Destination(
                    scheme="https", host="api.example.com", ports=[443, 8443], path_prefix="/v1"
                )
            ],
        ),
        Connector(
            connector_id="shell",
            driver_kind=DriverKind.RESTRICTED_SHELL,
            description="ls only",
            limits=LIMITS,
            commands=[CommandRule(name="ls", path="/usr/bin/ls", allowed_flags=["-l"], max_args=3)],
        ),
        Connector(connector_id="unbounded", driver_kind=DriverKind.NOOP, description="no limits"),
        Connector(
            connector_id="agent",
            driver_kind=DriverKind.OPENCODE,
            description="a driver kind the profile does not allow",
            limits=LIMITS,
        ),
    ],
)
PROFILE = PolicyProfile(
    profile_id="test",
    version="1",
    description="hand-built profile for the gate tests",
    max_steps=4,
    allowed_driver_kinds=[DriverKind.NOOP, DriverKind.HTTP, DriverKind.RESTRICTED_SHELL],
    planner_instruction="Propose only.",
)


def _step(
    step_id: str,
    connector_id: str,
    driver_kind: DriverKind,
    step_input: JsonObject | None = None,
    input_from: str | None = None,
    pointer: str = "",
) -> PlanStep:
    body: dict[str, Any] = {
        "step_id": step_id,
        "verb": "note",
        "connector_id": connector_id,
        "driver_kind": driver_kind.value,
    }
    if input_from is not None:
        body["input_from"] = {"step_id": input_from, "pointer": pointer}
    else:
        body["input"] = step_input if step_input is not None else {}
    return PlanStep.model_validate(body)


def _plan(*steps: PlanStep) -> Plan:
    return Plan(objective="test the gate", steps=list(steps))


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


# --- property tests ---------------------------------------------------------------------------

POOLS = (DEFAULT_POOL, POOL)
KNOWN_IDS = sorted({c.connector_id for p in POOLS for c in p.connectors})
CONNECTOR_IDS = st.sampled_from([*KNOWN_IDS, "nope", "note2", "shell0", "local-https"])
ARG_WORDS = [
    "ls", "wc", "echo", "head", "sha256sum", "rm", "sh", "cat", "/usr/bin/ls", "./ls",
    "-l", "-c", "-n", "-R", "--all", "x.txt", "dir/f", "../x", "/etc/passwd", "a=/etc",
    "@/etc/x", "a..b", "5", "",
]  # fmt: skip
ARGV = st.lists(st.one_of(st.sampled_from(ARG_WORDS), st.text(max_size=6)), min_size=0, max_size=5)
URLS = st.one_of(
    st.builds(
        "{}://{}{}{}".format,
        st.sampled_from(["http", "https", "HTTP", "ftp", "file"]),
        st.sampled_from(
            [
                "127.0.0.1",
                "localhost",
                "api.example.com",
                "API.EXAMPLE.COM",
                "10.0.0.1",
                "[::1]",
                "user@127.0.0.1",
                "127.0.0.1.nip.io",
                "",
            ]
        ),
        st.sampled_from(["", ":80", ":443", ":8443", ":8080", ":0", ":99999", ":x"]),
        st.sampled_from(["", "/", "/v1", "/v1/items", "/v1x", "/v2", "/a/../b", "/%2e%2e/x"]),
    ),
    st.text(max_size=30),
)


@st.composite
def _argv(draw: st.DrawFn, connector: Connector | None) -> list[JsonValue]:
    """Often shaped like an allowed call (a listed command, listed flags), often not."""
    if connector is None or not connector.commands or draw(st.booleans()):
        return list[JsonValue](draw(ARGV))
    rule = draw(st.sampled_from(connector.commands))
    words = st.sampled_from([*rule.allowed_flags, "x.txt", "dir/f", "5", *ARG_WORDS])
    return [rule.name, *draw(st.lists(words, max_size=3))]


@st.composite
def _url(draw: st.DrawFn, connector: Connector | None) -> str:
    """Often built from one of the connector's destinations, often not."""
    if connector is None or not connector.destinations or draw(st.booleans()):
        return draw(URLS)
    d = draw(st.sampled_from(connector.destinations))
    ports = d.ports or [80, 443, 8080]
    port = draw(st.sampled_from(["", *(f":{p}" for p in ports), ":1"]))
    path = draw(st.sampled_from([d.path_prefix, d.path_prefix.rstrip("/") + "/x", "/", "/zz"]))
    return f"{d.scheme}://{d.host}{port}{path}"


@st.composite
def _step_inputs(draw: st.DrawFn, connector: Connector | None) -> JsonObject:
    shape = draw(st.sampled_from(["argv", "url", "note", "both", "results"]))
    if shape == "note" and connector is not None:
        shape = {DriverKind.RESTRICTED_SHELL: "argv", DriverKind.HTTP: "url"}.get(
            connector.driver_kind, "note"
        )
    if shape == "argv":
        return {"argv": draw(_argv(connector))}
    if shape == "url":
        return {"url": draw(_url(connector))}
    if shape == "both":
        return {"url": draw(_url(connector)), "argv": draw(_argv(connector))}
    if shape == "results":
        key = draw(st.sampled_from(sorted(RESULT_KEYS)))
        return {"argv": draw(_argv(connector)), "meta": [{key: 0}]}
    return {"message": draw(st.text(max_size=10))}


@st.composite
def _plans(draw: st.DrawFn, pool: ToolPool) -> Plan:
    count = draw(st.integers(min_value=1, max_value=6))
    own_ids = st.sampled_from([c.connector_id for c in pool.connectors])
    steps: list[PlanStep] = []
    for i in range(count):
        connector_id = draw(st.one_of(own_ids, own_ids, own_ids, CONNECTOR_IDS))
        known = pool.connector(connector_id)
        # usually the connector's own driver kind, so that some plans get far enough to pass
        if known is not None and draw(st.integers(0, 3)) > 0:
            kind = known.driver_kind
        else:
            kind = draw(st.sampled_from(list(DriverKind)))
        if i > 0 and draw(st.integers(0, 5)) == 0:
            steps.append(_step(f"s{i}", connector_id, kind, input_from=f"s{i - 1}"))
        else:
            steps.append(_step(f"s{i}", connector_id, kind, draw(_step_inputs(known))))
    return _plan(*steps)


@st.composite
def _profiles(draw: st.DrawFn) -> PolicyProfile:
    kinds = draw(st.lists(st.sampled_from(list(DriverKind)), min_size=1, unique=True))
    if draw(st.booleans()):
        kinds = list(DEFAULT_PROFILE.allowed_driver_kinds)
    return DEFAULT_PROFILE.model_copy(
        update={"max_steps": draw(st.integers(1, 6)), "allowed_driver_kinds": kinds}
    )


def _oracle_argv_allowed(argv: JsonValue, connector: Connector) -> bool:
    if not isinstance(argv, list) or not argv or not all(isinstance(a, str) for a in argv):
        return False
    words = [a for a in argv if isinstance(a, str)]
    rules = [r for r in connector.commands if r.name == words[0]]
    if not rules:
        return False
    rule = rules[0]
    args = words[1:]
    if len(args) > rule.max_args:
        return False
    for arg in args:
        if re.fullmatch(rule.arg_pattern, arg) is None:
            return False
        if arg.startswith("-") and arg not in rule.allowed_flags:
            return False
        for piece in [arg, *re.split(r"[=,:@]", arg)]:
            if piece.startswith("/") or ".." in piece.split("/"):
                return False
    return True


def _oracle_url_allowed(url: JsonValue, connector: Connector) -> bool:
    if not isinstance(url, str):
        return False
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https") or "@" in parts.netloc or not parts.hostname:
        return False
    port = parts.port if parts.port is not None else {"http": 80, "https": 443}[scheme]
    path = parts.path or "/"
    for d in connector.destinations:
        if (
            d.scheme == scheme
            and d.host.strip("[]").lower() == parts.hostname.lower()
            and (d.ports is None or port in d.ports)
            and path.startswith(d.path_prefix)
        ):
            return True
    return False


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), pool=st.sampled_from(POOLS), profile=_profiles())
def test_arbitrary_plans_never_pass_unless_every_step_is_allowed(
    data: st.DataObject, pool: ToolPool, profile: PolicyProfile
) -> None:
    plan = data.draw(_plans(pool))
    try:
        gate_plan(plan, pool, profile)
    except GatehouseError:
        return
    assert len(plan.steps) <= profile.max_steps
    for step in plan.steps:
        connector = pool.connector(step.connector_id)
        assert connector is not None, step
        assert step.driver_kind is connector.driver_kind, step
        assert step.driver_kind in profile.allowed_driver_kinds, step
        assert connector.limits is not None, step
        if step.input is None:
            assert step.input_from is not None  # input checks wait until it is resolved
            continue
        assert find_results(step.input) is None, step
        if step.driver_kind is DriverKind.RESTRICTED_SHELL:
            assert _oracle_argv_allowed(step.input.get("argv"), connector), step
        elif step.driver_kind is DriverKind.HTTP:
            assert _oracle_url_allowed(step.input.get("url"), connector), step


def test_the_property_strategies_do_reach_allowed_plans() -> None:
    """Guard against a vacuous property: some generated plans of each kind must pass."""
    passed: set[DriverKind] = set()

    @settings(max_examples=800, deadline=None, database=None, derandomize=True)
    @given(plan=_plans(DEFAULT_POOL))
    def probe(plan: Plan) -> None:
        try:
            gate_plan(plan, DEFAULT_POOL, DEFAULT_PROFILE)
        except GatehouseError:
            return
        passed.update(s.driver_kind for s in plan.steps)

    probe()
    assert passed == {DriverKind.NOOP, DriverKind.HTTP, DriverKind.RESTRICTED_SHELL}


# find_results: an injected result key is found at any depth, in any letter case.

_CLEAN_KEY = st.text(
    alphabet="abcdefghijklmnopqrstuvwxyz_0123456789", min_size=1, max_size=8
).filter(lambda k: k not in RESULT_KEYS)
_CLEAN_JSON: st.SearchStrategy[JsonValue] = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_CLEAN_KEY, inner, max_size=3),
    max_leaves=10,
)
_PATH = st.lists(
    st.one_of(
        st.tuples(
            st.just("dict"), _CLEAN_KEY, st.dictionaries(_CLEAN_KEY, _CLEAN_JSON, max_size=2)
        ),
        st.tuples(st.just("list"), st.integers(0, 3), st.lists(_CLEAN_JSON, max_size=3)),
    ),
    max_size=6,
)


@st.composite
def _result_key(draw: st.DrawFn) -> str:
    key = draw(st.sampled_from(sorted(RESULT_KEYS)))
    upper = draw(st.lists(st.booleans(), min_size=len(key), max_size=len(key)))
    return "".join(c.upper() if u else c for c, u in zip(key, upper, strict=True))


@given(clean=_CLEAN_JSON)
def test_find_results_finds_nothing_in_clean_json(clean: JsonValue) -> None:
    assert find_results(clean) is None


@given(
    key=_result_key(),
    value=_CLEAN_JSON,
    siblings=st.dictionaries(_CLEAN_KEY, _CLEAN_JSON, max_size=3),
    path=_PATH,
)
def test_find_results_finds_an_injected_key_at_any_depth(
    key: str,
    value: JsonValue,
    siblings: dict[str, JsonValue],
    path: list[tuple[str, Any, Any]],
) -> None:
    doc: JsonValue = {**siblings, key: value}
    for kind, where, around in reversed(path):
        if kind == "dict":
            doc = {**around, where: doc}
        else:
            items = list(around)
            items.insert(min(where, len(items)), doc)
            doc = items
    found = find_results(doc)
    assert found is not None, doc
    assert found.rsplit("/", 1)[-1].lower() in RESULT_KEYS
    # and the pointer leads to that key (clean keys hold no '/' or '~')
    node: JsonValue = doc
    tokens = found.split("/")[1:]
    for token in tokens[:-1]:
        if isinstance(node, list):
            node = node[int(token)]
        else:
            assert isinstance(node, dict)
            node = node[token]
    assert isinstance(node, dict) and tokens[-1] in node
