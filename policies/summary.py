"""A plan in plain words, for the person who decides on it.

Each step becomes one sentence saying what it will do (which address it sends
what to, which program it runs, what an agent is asked, which MCP tool it
calls) and whether it can change anything; the plan as a whole becomes the
lists an approver looks for first: where it goes on the network, what it runs,
which steps take outside data (an earlier step's output, which nobody approved),
and whether it is read-only. Pure: read from the plan alone, as approved.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import urlsplit

from contracts import DriverKind, JsonObject, JsonValue, Plan, PlanStep
from policies.gate import read_only
from policies.taint import tainted

__all__ = ["PlanSummary", "StepSummary", "summarize"]

_SHOWN = 160  # characters of a prompt or a note shown in a sentence


@dataclass(frozen=True)
class StepSummary:
    step_id: str
    title: str | None
    says: str  # one sentence: what the step will do
    changes: bool  # whether it can change something (anything but a note or a read)
    outside: str | None  # where its outside data comes from, when it takes any


@dataclass
class PlanSummary:  # filled in step by step by ``summarize``
    steps: list[StepSummary]
    read_only: bool
    destinations: list[str] = field(default_factory=list)  # "GET api.example.com"
    commands: list[str] = field(default_factory=list)  # the programs run
    tools: list[str] = field(default_factory=list)  # MCP tools called
    agents: int = 0  # OpenCode steps
    outside_data: list[str] = field(default_factory=list)  # step ids


def _short(value: JsonValue) -> str:
    text = " ".join(str(value).split())
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


def _http(given: JsonObject, out: PlanSummary) -> tuple[str, bool]:
    method = _str(given, "method", "GET").upper()
    url = _str(given, "url")
    host = urlsplit(url).netloc or "(an address from outside data)"
    out.destinations.append(f"{method} {host}")
    body = " with a JSON body" if given.get("json") is not None else ""
    return f"Sends {method} to {url or host}{body}", method not in {"GET", "HEAD"}


def _shell(given: JsonObject, out: PlanSummary) -> tuple[str, bool]:
    argv = given.get("argv")
    words = [a for a in argv if isinstance(a, str)] if isinstance(argv, list) else []
    if words:
        out.commands.append(words[0])
    return f"Runs `{_short(' '.join(words))}` in the sandbox", True


def _agent(given: JsonObject, out: PlanSummary) -> tuple[str, bool]:
    out.agents += 1
    return (
        f"Asks an OpenCode agent, who may edit the workspace: “{_short(given.get('prompt'))}”",
        True,
    )


def _mcp(given: JsonObject, connector: str, out: PlanSummary) -> tuple[str, bool]:
    tool = _str(given, "tool", "(a tool)")
    out.tools.append(f"{tool} ({connector})")
    arguments = given.get("arguments")
    shown = f" with {_short(arguments)}" if arguments else ""
    return f"Calls MCP tool {tool} on {connector}{shown}", True


def _sentence(step: PlanStep, out: PlanSummary) -> tuple[str, bool]:
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
    return ("Records a note" + (f": {_short(note)}" if note is not None else "")), False


def summarize(plan: Plan) -> PlanSummary:
    out = PlanSummary(steps=[], read_only=read_only(plan))
    from_outside = tainted(plan)  # the steps whose output nobody approved
    for step in plan.steps:
        says, changes = _sentence(step, out)
        fed = step.input_from is not None and step.input_from.step_id in from_outside
        if fed:
            out.outside_data.append(step.step_id)
        came = _outside(step) if fed else None
        out.steps.append(StepSummary(step.step_id, step.title, says, changes, came))
    return out
