"""Unit tests for the restricted_shell handler (no database): real programs from
/usr/bin, run in the workspace under the connector's command rules and limits."""

from __future__ import annotations

import hashlib
import time
from pathlib import Path
from typing import Any

import pytest

from contracts import CommandRule, ErrorCode, GatehouseError
from contracts.opa_run import OpaJob
from tests.unit.worker.handlers.handler_cases import assert_failed as _assert_failed
from tests.unit.worker.handlers.handler_cases import ctx as _ctx
from tests.unit.worker.handlers.handler_cases import run as _run
from worker.coordinator.executor import Delivered
from worker.handlers import restricted_shell as shell_handler

SIMPLE = ("echo", "sha256sum", "sleep", "yes", "false", "ls")
RULES = [CommandRule(name=name, path=f"/usr/bin/{name}") for name in SIMPLE] + [
    CommandRule(name="head", path="/usr/bin/head", allowed_flags=["-c"]),
    CommandRule(name="env", path="/usr/bin/env", max_args=0),
    CommandRule(name="ghost", path="/usr/bin/gatehouse-does-not-exist"),
]


def _sh(workspace: Path, step: Any, timeout_s: float = 2.0, cap: int = 10**6) -> Delivered:
    return _run(shell_handler.run, _ctx(workspace, (), RULES, timeout_s, cap), step)


def test_shell_echo(tmp_path: Path) -> None:
    result = _sh(tmp_path, {"argv": ["echo", "hello", "world"]})
    assert result.ok is True, result.error_message
    out = result.output
    assert (out["exit_code"], out["stdout"], out["stderr"]) == (0, "hello world\n", "")
    assert (out["stdout_bytes"], out["stderr_bytes"], out["truncated"]) == (12, 0, False)
    assert out["stdout_sha256"] == hashlib.sha256(b"hello world\n").hexdigest()
    assert out["stderr_sha256"] == hashlib.sha256(b"").hexdigest()
    assert out["argv"] == ["echo", "hello", "world"]
    artifacts = {a.name: (a.media_type, a.content) for a in result.artifacts}
    assert artifacts == {"stdout": ("text/plain", b"hello world\n"), "stderr": ("text/plain", b"")}


def test_shell_stdin_reaches_the_program(tmp_path: Path) -> None:
    result = _sh(tmp_path, {"argv": ["sha256sum"], "stdin": "abc"})
    assert result.ok is True
    assert str(result.output["stdout"]).split()[0] == hashlib.sha256(b"abc").hexdigest()


def test_shell_large_stdin_to_a_program_that_ignores_it(tmp_path: Path) -> None:
    result = _sh(tmp_path, {"argv": ["echo", "ok"], "stdin": "z" * (64 * 1024)})
    assert result.ok is True
    assert result.output["stdout"] == "ok\n"


def test_shell_timeout_kills_the_process(tmp_path: Path) -> None:
    started = time.monotonic()
    result = _sh(tmp_path, {"argv": ["sleep", "5"]}, timeout_s=0.3)
    assert time.monotonic() - started < 1.5
    _assert_failed(result, ErrorCode.HANDLER_TIMEOUT)
    assert result.output["exit_code"] == -9


def test_shell_output_is_capped(tmp_path: Path) -> None:
    result = _sh(tmp_path, {"argv": ["head", "-c", "5000"], "stdin": "a" * 5000}, cap=1000)
    assert result.ok is True
    assert result.output["stdout_bytes"] == 1000
    assert result.output["stdout"] == "a" * 1000
    assert result.output["truncated"] is True
    assert result.artifacts[0].content == b"a" * 1000


def test_shell_endless_output_is_capped_and_timed_out(tmp_path: Path) -> None:
    started = time.monotonic()
    result = _sh(tmp_path, {"argv": ["yes"]}, timeout_s=0.3, cap=100)
    assert time.monotonic() - started < 1.5
    _assert_failed(result, ErrorCode.HANDLER_TIMEOUT)
    assert result.output["stdout_bytes"] == 100
    assert result.output["stdout"] == "y\n" * 50
    assert result.output["truncated"] is True


def test_shell_non_zero_exit_is_a_failed_result(tmp_path: Path) -> None:
    result = _sh(tmp_path, {"argv": ["false"]})
    _assert_failed(result)
    assert result.output["exit_code"] == 1
    result = _sh(tmp_path, {"argv": ["ls", "missing-file"]})
    _assert_failed(result)
    assert result.output["exit_code"] == 2
    assert "missing-file" in str(result.output["stderr"])
    assert result.output["stderr_bytes"] == len(result.artifacts[1].content) > 0


def test_shell_environment_is_scrubbed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GATEHOUSE_SECRET", "do-not-leak")
    result = _sh(tmp_path, {"argv": ["env"]})
    assert result.ok is True
    env = dict(line.split("=", 1) for line in str(result.output["stdout"]).splitlines())
    ws = str(tmp_path.resolve())
    assert env.pop("PWD", ws) == ws  # the sandbox's working directory, said by bubblewrap
    assert env == {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": ws, "TMPDIR": f"{ws}/.tmp"}
    assert (tmp_path / ".tmp").is_dir()
    box = result.output["sandbox"]
    assert isinstance(box, dict) and box["tool"] == "bubblewrap"


def test_shell_in_an_opa_run_gets_the_opa_variables(tmp_path: Path) -> None:
    job = OpaJob(
        archive_name="report",
        archive_sha256="c" * 64,
        opa_version="0.1",
        execution_mode="batch",
        data_root="inputs/",
    )
    result = _run(shell_handler.run, _ctx(tmp_path, (), RULES), {"argv": ["env"]}, opa=job)
    assert result.ok is True
    env = dict(line.split("=", 1) for line in str(result.output["stdout"]).splitlines())
    ws = str(tmp_path.resolve())
    assert {k: v for k, v in env.items() if k.startswith("OPA_")} == {
        "OPA_VERSION": "0.1",
        "OPA_ARCHIVE_NAME": "report",
        "OPA_EXTRACTED_ROOT": f"{ws}/.opa",
        "OPA_DATA_ROOT": f"{ws}/.opa/inputs",
        "OPA_OUTPUT_ROOT": f"{ws}/output",
        "OPA_EXECUTION_MODE": "batch",
    }
    assert env["PATH"] == "/usr/bin:/bin"  # the rest is as scrubbed as ever


def test_shell_runs_in_the_workspace(tmp_path: Path) -> None:
    (tmp_path / "marker-file").write_text("x")
    result = _sh(tmp_path, {"argv": ["ls"]})
    assert result.ok is True
    assert "marker-file" in str(result.output["stdout"]).split()


@pytest.mark.parametrize(
    "argv", [["rm", "x"], ["/usr/bin/echo"], ["echo", "/etc/passwd"], ["ls", "../"]]
)
def test_shell_refuses_disallowed_argv(tmp_path: Path, argv: list[str]) -> None:
    with pytest.raises(GatehouseError) as info:
        _sh(tmp_path, {"argv": argv})
    assert info.value.code is ErrorCode.COMMAND_NOT_ALLOWED


BAD_SHELL: list[Any] = [{}, {"argv": "echo hi"}, {"argv": ["echo", 1]}, {"argv": ["echo"], "x": 1}]
BAD_SHELL += [{"argv": ["echo"], "stdin": 5}, {"argv": ["echo"], "stdin": "z" * (64 * 1024 + 1)}]


@pytest.mark.parametrize("step", BAD_SHELL)
def test_shell_invalid_input_is_a_failed_result(tmp_path: Path, step: Any) -> None:
    _assert_failed(_sh(tmp_path, step))


def test_shell_missing_workspace_or_program_is_a_failed_result(tmp_path: Path) -> None:
    _assert_failed(_sh(tmp_path / "gone", {"argv": ["echo", "hi"]}))
    result = _sh(tmp_path, {"argv": ["ghost"]})
    _assert_failed(result)
    assert "FileNotFoundError" in (result.error_message or "")
