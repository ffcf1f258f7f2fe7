"""Property tests for the plan gate (policies.gate), against an independent oracle:
arbitrary plans never pass unless every step is allowed, and an injected result
key is found at any depth.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlsplit

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contracts import (
    Connector,
    DriverKind,
    GatehouseError,
    JsonObject,
    JsonValue,
    Plan,
    PlanStep,
    PolicyProfile,
    ToolPool,
)
from policies.gate import RESULT_KEYS, find_results, gate_plan
from tests.unit.policies.gate_cases import DEFAULT_POOL, DEFAULT_PROFILE, POOL
from tests.unit.policies.gate_cases import plan as _plan
from tests.unit.policies.gate_cases import step as _step

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
    # "note" becomes the connector's own shape: weighted so that, with the handlers'
    # input checks at the gate (a shell step takes no url), some plans of each kind pass
    shape = draw(st.sampled_from(["argv", "url", "note", "note", "note", "both", "results"]))
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
