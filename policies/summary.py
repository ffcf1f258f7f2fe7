"""A plan in plain words, for the person who decides on it.

It also spells, per step, the request its handler will send (``request_of``):
an http step's request line, headers (the plan's, secrets shown as •••, and
the ones the handler adds) and JSON body; a shell step's argv; an MCP step's
``tools/call``. Those are the plan's own values, which the digest covers, and
the handler's fixed additions, which the tool pool's digest pins.

Each step becomes one sentence saying what it will do (which address it sends
what to, which program it runs, what an agent is asked, which MCP tool it
calls) and whether it can change anything; the plan as a whole becomes the
lists an approver looks for first: where it goes on the network, what it runs,
which steps take outside data (an earlier step's output, which nobody approved),
and whether it is read-only. Pure: read from the plan alone, as approved.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from contracts import Connector, DriverKind, JsonObject, JsonValue, Plan, PlanStep, ToolPool
from policies.risk import Risk, risk_words, step_risk
from policies.taint import tainted

__all__ = ["PlanSummary", "StepSummary", "request_of", "summarize"]

_SHOWN = 160  # characters of a prompt or a note shown in a sentence


@dataclass(frozen=True)
class StepSummary:
    step_id: str
    title: str | None
    says: str  # one sentence: what the step will do
    outside: str | None  # where its outside data comes from, when it takes any
    risk: Risk  # read, change or outside world (``policies.risk``): what earns a ⚠
    request: str | None = None  # what its handler will send (None: nothing, or not known yet)


@dataclass
class PlanSummary:  # filled in step by step by ``summarize``
    steps: list[StepSummary]
    destinations: list[str] = field(default_factory=list)  # "GET api.example.com"
    commands: list[str] = field(default_factory=list)  # the programs run
    tools: list[str] = field(default_factory=list)  # MCP tools called
    agents: int = 0  # OpenCode steps
    outside_data: list[str] = field(default_factory=list)  # step ids

    @property
    def risk_line(self) -> str:
        """The steps that earn a ⚠, by class, most first (``policies.risk.risk_words``)."""
        return risk_words(s.risk for s in self.steps)


def _short(value: JsonValue) -> str:
    # Text as it is, anything else as JSON: one style of value in every sentence.
    shown = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    text = " ".join(shown.split())
    return text if len(text) <= _SHOWN else text[: _SHOWN - 1] + "…"


def _str(given: JsonObject, key: str, default: str = "") -> str:
    value = given.get(key, default)
    return value if isinstance(value, str) else default


def _outside(step: PlanStep) -> str | None:
    came = step.input_from
    if came is None:
        return None
    part = f"{came.pointer} of " if came.pointer else ""
    into = f", into {came.into}" if came.into is not None else ""
    return f"takes {part}step {came.step_id}'s output{into}"


def _http(given: JsonObject, out: PlanSummary) -> str:
    method = _str(given, "method", "GET").upper()
    url = _str(given, "url")
    host = urlsplit(url).netloc or "(an address from outside data)"
    out.destinations.append(f"{method} {host}")
    body = " with a JSON body" if given.get("json") is not None else ""
    return f"Sends {method} to {url or host}{body}"


def _shell(given: JsonObject, out: PlanSummary) -> str:
    argv = given.get("argv")
    words = [a for a in argv if isinstance(a, str)] if isinstance(argv, list) else []
    if words:
        out.commands.append(words[0])
    return f"Runs `{_short(' '.join(words))}` in the sandbox"


def _agent(given: JsonObject, out: PlanSummary) -> str:
    out.agents += 1
    return (
        f"Asks an OpenCode agent, who may edit the workspace: “{_short(given.get('prompt', ''))}”"
    )


def _mcp(given: JsonObject, connector: str, out: PlanSummary) -> str:
    tool = _str(given, "tool", "(a tool)")
    out.tools.append(f"{tool} ({connector})")
    arguments = given.get("arguments")
    shown = f" with {_short(arguments)}" if arguments else ""
    return f"Calls MCP tool {tool} on {connector}{shown}"


def _sentence(step: PlanStep, out: PlanSummary) -> str:
    given: JsonObject = step.input or {}
    kind = step.driver_kind
    if kind is DriverKind.HTTP:
        return _http(given, out)
    if kind is DriverKind.RESTRICTED_SHELL:
        return _shell(given, out)
    if kind is DriverKind.OPENCODE:
        return _agent(given, out)
    if kind is DriverKind.MCP_PROXY:
        return _mcp(given, step.connector_id, out)
    note = given.get("text", given.get("note"))
    return "Records a note" + (f": {_short(note)}" if note is not None else "")


# Header names whose values are credentials: shown as ••• on the card.
_SECRET = re.compile(r"authorization|cookie|token|secret|password|api[-_]?key", re.IGNORECASE)


def _http_request(given: JsonObject, connector: Connector | None) -> str:
    parts = urlsplit(_str(given, "url"))
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    lines = [f"{_str(given, 'method', 'GET').upper()} {target} HTTP/1.1", f"Host: {parts.netloc}"]
    headers = given.get("headers")
    for name, value in headers.items() if isinstance(headers, dict) else []:
        lines.append(f"{name}: {'•••' if _SECRET.search(name) else value}")
    if connector is None or connector.idempotency == "key":
        lines.append("Idempotency-Key: (the call's op key, fixed when it runs)")
    lines.append("Accept-Encoding: identity")
    body = given.get("json")
    if "json" in given:
        if not (isinstance(headers, dict) and any(k.lower() == "content-type" for k in headers)):
            lines.append("Content-Type: application/json")
        lines += ["", json.dumps(body, ensure_ascii=False, allow_nan=False)]
    return "\n".join(lines)


def request_of(step: PlanStep, connector: Connector | None) -> str | None:
    """What the step's handler will send, as far as the plan fixes it; None for a
    note, an agent's turn (a conversation, not one request), or an input that comes
    whole from an earlier step (not known until it runs)."""
    given = step.input
    if given is None:  # the whole input comes from an earlier step
        return None
    kind = step.driver_kind
    if kind is DriverKind.HTTP:
        return _http_request(given, connector)
    if kind is DriverKind.RESTRICTED_SHELL:
        argv = given.get("argv")
        return (
            "argv: "
            + json.dumps(argv, ensure_ascii=False)
            + "\n(in the sandbox: the run's workspace, no network)"
        )
    if kind is DriverKind.MCP_PROXY:
        call = {"name": given.get("tool"), "arguments": given.get("arguments", {})}
        return f"tools/call to {step.connector_id}: " + json.dumps(
            call, ensure_ascii=False, sort_keys=True
        )
    return None


def summarize(plan: Plan, pool: ToolPool | None = None) -> PlanSummary:
    """``pool``: the run's tool pool, to spell each request as its connector sends it."""
    out = PlanSummary(steps=[])
    from_outside = tainted(plan)  # the steps whose output nobody approved
    for step in plan.steps:
        says = _sentence(step, out)
        fed = step.input_from is not None and step.input_from.step_id in from_outside
        if fed:
            out.outside_data.append(step.step_id)
        came = _outside(step) if fed else None
        connector = pool.connector(step.connector_id) if pool is not None else None
        request = request_of(step, connector)
        risk = step_risk(step, connector)
        out.steps.append(StepSummary(step.step_id, step.title, says, came, risk, request))
    return out
