"""Policy tests as files: the shipped ones pass (run here, so in every ``check``), a
failed expectation fails its case and ``gatehouse policy test`` exits 3 with a report
per case; a proposed policy set can be tested before it is installed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import policies
from contracts import PolicyTestFile
from policies import catalog
from policies.policy_tests import run_case
from shim.cli import main

SHIPPED = sorted((Path(policies.__file__).parent / "cedar").glob("*.tests.json"))


def _step(sid: str, method: str = "GET") -> dict[str, Any]:
    url = "http://127.0.0.1:8000/items"
    return {
        "step_id": sid,
        "verb": "fetch",
        "connector_id": "local-http",
        "driver_kind": "http",
        "input": {"method": method, "url": url},
    }


def _file(tmp_path: Path, expect: dict[str, Any], *steps: dict[str, Any]) -> Path:
    doc = {
        "profile": "guarded",
        "cases": [
            {
                "name": "the case",
                "submitted_by": "alice",
                "plan": {"objective": "t", "steps": list(steps)},
                "expect": expect,
            }
        ],
    }
    path = tmp_path / "case.tests.json"
    path.write_text(json.dumps(doc))
    return path


def _exit(argv: list[str]) -> int:
    with pytest.raises(SystemExit) as ended:
        main(argv)
    code = ended.value.code
    return code if isinstance(code, int) else 0


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name)
def test_the_shipped_policy_tests_pass(path: Path) -> None:
    tests = PolicyTestFile.model_validate_json(path.read_text())
    profile = catalog.profile(tests.profile).model
    pool = catalog.tool_pool(tests.tool_pool).model
    for case in tests.cases:
        result = run_case(case, profile, pool)
        assert result.ok, (case.name, result)


def test_every_shipped_policy_set_has_tests() -> None:
    tested = {p.name.removesuffix(".tests.json") for p in SHIPPED}
    sets = {s.model.policy_set_id for s in catalog.list_cedar_policy_sets()}
    assert sets and sets <= tested


def test_a_failed_expectation_fails_its_case(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _file(
        tmp_path, {"read": "allow", "write": "allow"}, _step("read"), _step("write", "POST")
    )
    assert _exit(["policy", "test", str(path)]) == 3
    out = capsys.readouterr().out
    assert "FAIL  case.tests.json: the case" in out
    assert "step write: expected allow, got cedar_denied ['http-reads-only']" in out
    assert "http-reads-only" in out and "1 cases, 0 passed, 1 failed" in out


def test_a_met_expectation_passes_and_names_the_policies(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    want = {"decision": "cedar_denied", "policies": ["http-reads-only"]}
    path = _file(tmp_path, {"read": "allow", "write": want}, _step("read"), _step("write", "POST"))
    assert _exit(["policy", "test", str(path), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["failed"] == 0 and report["cases"] == 1
    assert [s["got"] for s in report["results"][0]["steps"]] == [
        "allow",
        "cedar_denied ['http-reads-only']",
    ]
    # the wrong policy named is a failure, though the step is denied
    wrong = {"decision": "cedar_denied", "policies": ["no-unkeyed-callees"]}
    path = _file(tmp_path, {"read": "allow", "write": wrong}, _step("read"), _step("write", "POST"))
    assert _exit(["policy", "test", str(path)]) == 3


def test_a_step_without_expectation_fails_the_case(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _file(tmp_path, {"read": "allow"}, _step("read"), _step("other"))
    assert _exit(["policy", "test", str(path)]) == 3
    assert "step 'other' has no expectation" in capsys.readouterr().out


def test_a_proposed_policy_set_is_tested_before_it_is_installed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    proposed = tmp_path / "strict.cedar"
    proposed.write_text(
        '@id("all") permit (principal, action, resource);\n'
        '@id("no-http") forbid (principal, action == Gatehouse::Action::"http", resource);\n'
    )
    want = {"decision": "cedar_denied", "policies": ["no-http"]}
    path = _file(tmp_path, {"read": want}, _step("read"))
    assert _exit(["policy", "test", str(path), "--cedar", str(proposed)]) == 0
    assert _exit(["policy", "test", str(path)]) == 3  # the installed set lets it read
    capsys.readouterr()
    proposed.write_text('permit (principal, action, resource == Gatehouse::Connector::"ftp");')
    assert _exit(["policy", "test", str(path), "--cedar", str(proposed)]) == 2
    assert 'Gatehouse::Connector::"ftp"' in capsys.readouterr().err


def test_a_file_that_is_no_policy_test_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "x.json"
    path.write_text('{"profile": "guarded", "cases": []}')
    assert _exit(["policy", "test", str(path)]) == 2
    assert "is not a policy test file" in capsys.readouterr().err


def test_policy_schema_prints_the_schema_of_the_pools(capsys: pytest.CaptureFixture[str]) -> None:
    assert _exit(["policy", "schema"]) == 0
    schema = json.loads(capsys.readouterr().out)
    types = schema["Gatehouse"]["entityTypes"]
    assert {"User", "ToolPool", "Connector", "McpTool"} <= set(types)
    assert "mcp_proxy" in schema["Gatehouse"]["actions"]


def test_what_if_refuses_what_it_cannot_try(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path / 'none.sqlite'}"
    # --profile goes with a policy set only
    assert (
        _exit(["policy", "what-if", "default", "--profile", "guarded", "--database-url", url]) == 2
    )
    assert "--profile goes with a Cedar policy set" in capsys.readouterr().err
    broken = tmp_path / "broken.cedar"
    broken.write_text("permit (principal, action, resource")
    assert _exit(["policy", "what-if", str(broken), "--database-url", url]) == 2
    assert "does not parse" in capsys.readouterr().err
    assert (
        _exit(["policy", "what-if", "guardrails", "--since", "last week", "--database-url", url])
        == 2
    )
    assert "--since 'last week'" in capsys.readouterr().err
    assert _exit(["policy", "what-if", "no-such-profile", "--database-url", url]) == 1
    assert "unknown_profile" in capsys.readouterr().err
    # a database that is not there is never created by a read
    assert _exit(["policy", "what-if", "guardrails", "--database-url", url]) == 1
    assert not (tmp_path / "none.sqlite").exists()
