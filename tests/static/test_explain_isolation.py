"""The explain report never feeds a plan (checked over the source).

An explain report is ``human_ui`` text a model wrote about a finished run. If
a planner, the gate or the flow could read one, a model's words about one run
could steer the next — the report would become an unvetted input to a plan.
So only the explain's own modules, the shim's route to it and the contracts
that define it may name it; everything else, the planners and the gate
included, may not import or mention it.
"""

from __future__ import annotations

import ast

from tests.static._source import Finding, Source, from_text, product_sources, report

# The only modules that may know the explain skill exists: its own folder, the
# contracts that define it, the worker's one step and workflow that run it, and the
# shim's route to it. An entry ending in "/" is a folder.
ALLOWED = (
    "contracts/__init__.py",
    "contracts/_errors.py",
    "contracts/_schemas.py",
    "contracts/channels.py",
    "contracts/durable.py",  # the workflow's durable name
    "contracts/explain.py",
    "shim/api/routes/explain.py",
    "shim/api/services/explain.py",
    "shim/cli/client.py",
    "shim/client/",  # the API client's calls, the explain route's among them
    "worker/explain/",
    "worker/durable/_calls.py",  # the explain step
    "worker/durable/_workflows.py",  # the workflow, in the registration list
)
# What the planners and the gate run on: they may not even name the explain.
PLAN_PATH = (
    "policies/",
    "worker/flow/",
    "worker/calls/",
    "worker/records/",
    "worker/replay/",
    "worker/planners/",
)
NAMES = frozenset(
    {
        "ExplainReport",
        "ExplainView",
        "ExplainStepNote",
        "EXPLAIN_WORKFLOW",
        "EXPLAIN_REPORT_SCHEMA_ID",
        "explain_with_model",
        "explain_request_body",
    }
)
MODULES = frozenset({"worker.explain", "contracts.explain", "shim.api.services.explain"})


def check(source: Source) -> list[Finding]:
    if source.rel.startswith(ALLOWED):
        return []
    findings: list[Finding] = []
    for node in ast.walk(source.tree):
        if isinstance(node, ast.ImportFrom):
            target = node.module or ""
            names = {a.name for a in node.names}
            inside = {m for m in MODULES if target == m or target.startswith(m + ".")}
            if inside or {f"{target}.{n}" for n in names} & MODULES:
                findings.append(Finding(source.rel, node.lineno, f"imports {target}"))
            for name in sorted(names & NAMES):
                findings.append(Finding(source.rel, node.lineno, f"imports {name}"))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in MODULES:
                    findings.append(Finding(source.rel, node.lineno, f"imports {alias.name}"))
        elif isinstance(node, ast.Name | ast.Attribute):
            name = node.id if isinstance(node, ast.Name) else node.attr
            if name in NAMES:
                findings.append(Finding(source.rel, node.lineno, f"names {name}"))
        elif (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and source.rel.startswith(PLAN_PATH)
            and ("@explain" in node.value or "explain_report" in node.value)
        ):
            findings.append(Finding(source.rel, node.lineno, "names the explain report"))
    return findings


def test_no_plan_reads_an_explain_report() -> None:
    findings = [f for s in product_sources() for f in check(s)]
    assert not findings, report("modules outside the explain that name it", findings)


def test_the_check_catches_what_it_claims() -> None:
    bad = {
        "worker/flow/_run.py": "from worker.explain import explain_run\n",
        "policies/gate.py": "from contracts import ExplainReport\n",
        "worker/calls/_tool.py": "import contracts\nx = contracts.ExplainView\n",
        "worker/replay/_ports.py": "from worker.explain._model import explain_with_model\n",
        "policies/templates.py": "STEP = '@explain'\n",
        "worker/planners/_opencode.py": "from worker import explain\n",
    }
    for rel, text in bad.items():
        assert check(from_text(text, rel)), rel
    own = from_text("from worker.explain import explain_run\n", "worker/explain/_x.py")
    assert check(own) == []
