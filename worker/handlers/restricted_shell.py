"""The restricted_shell handler: run one allowlisted program on an argv list.

Why it is shaped this way:

* ``check_argv`` picks the rule by name and vets every argument; the program
  runs by the rule's absolute path with ``shell=False``, so nothing is ever
  parsed by a shell or looked up on the caller's PATH.
* The environment is rebuilt from nothing (four variables, and the six
  ``OPA_*`` ones in a run from an OPA archive), so secrets in the worker's
  environment never reach the child.
* The child gets its own session (``start_new_session``) so a timeout can kill
  it *and* everything it spawned with one ``killpg``. ``preexec_fn`` is never
  used: the worker is multi-threaded and ``preexec_fn`` is unsafe there.
* stdout and stderr are read together in one ``selectors`` loop with a
  deadline, keeping the first ``max_output_bytes`` of each and discarding the
  rest, so a chatty child can neither fill memory nor block on a full pipe.
  stdin is written from the same loop so a child that never reads it cannot
  deadlock us either.
* A non-zero exit or a timeout is a *result* (``ok=False``), never an exception.
* The program runs in the kernel sandbox of ``worker/sandbox`` (namespaces, no
  network, read-only system, only the workspace writable, resource limits),
  recorded in the output as ``sandbox``. Without one the step is refused
  (``sandbox_unavailable``) unless the profile says ``unsandboxed_shell: allowed``.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from contracts import ErrorCode, JsonObject, JsonValue, Limits, sha256_hex
from contracts.execution import ExecutionEnvelope, ExecutionResult
from contracts.opa_run import opa_env
from policies.commands import check_argv
from policies.step_inputs import shell_input
from worker.handlers._base import (
    Artifact,
    HandlerContext,
    HandlerResult,
    answer,
    limits_of,
)
from worker.sandbox import Sandbox, limits_for
from worker.sandbox.bwrap import current as current_sandbox

__all__ = ["run"]

_READ_CHUNK = 64 * 1024
_WRITE_CHUNK = 4096
_SAFE_PATH = "/usr/bin:/bin"


@dataclass
class _Capture:
    """The first ``cap`` bytes of a stream; the rest is read and dropped."""

    cap: int
    data: bytearray = field(default_factory=bytearray)
    truncated: bool = False

    def feed(self, chunk: bytes) -> None:
        room = self.cap - len(self.data)
        if len(chunk) > room:
            self.data += chunk[: max(room, 0)]
            self.truncated = True
        else:
            self.data += chunk


@dataclass
class _Outcome:
    returncode: int
    stdout: _Capture
    stderr: _Capture
    timed_out: bool


def _failed(message: str) -> HandlerResult:
    return HandlerResult(
        ok=False, output={}, error_code=ErrorCode.HANDLER_FAILED, error_message=message[:2000]
    )


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def _exited_unreaped(pid: int, deadline: float) -> bool:
    """Wait until ``pid`` exits without reaping it, so its group id stays ours to kill.

    A reaped leader's pid (and so its group id) could be reused by an unrelated
    process; while it is an unreaped zombie, ``killpg`` on it is safe.
    """
    while True:
        if os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None:
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.005)


def _pump(proc: subprocess.Popen[bytes], stdin: bytes, cap: int, deadline: float) -> _Outcome:
    """Feed stdin and drain stdout/stderr until both close or the deadline passes."""
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    out, err = _Capture(cap), _Capture(cap)
    captures = {proc.stdout.fileno(): out, proc.stderr.fileno(): err}
    stdin_fd = proc.stdin.fileno()
    pending = memoryview(stdin)
    timed_out = False
    with selectors.DefaultSelector() as selector:
        for fd in captures:
            selector.register(fd, selectors.EVENT_READ)
        if pending:
            os.set_blocking(stdin_fd, False)
            selector.register(stdin_fd, selectors.EVENT_WRITE)
        else:
            proc.stdin.close()
        open_reads = len(captures)
        while open_reads:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                timed_out = True
                break
            for key, _ in selector.select(remaining):
                if key.fd == stdin_fd:
                    try:
                        pending = pending[os.write(stdin_fd, pending[:_WRITE_CHUNK]) :]
                    except BlockingIOError:
                        continue
                    except BrokenPipeError:
                        pending = pending[:0]
                    if not pending:
                        selector.unregister(stdin_fd)
                        proc.stdin.close()
                    continue
                chunk = os.read(key.fd, _READ_CHUNK)
                if chunk:
                    captures[key.fd].feed(chunk)
                else:
                    selector.unregister(key.fd)
                    open_reads -= 1
    if not timed_out:
        timed_out = not _exited_unreaped(proc.pid, deadline)
    # Kill the whole group either way: on timeout that is the point, and after
    # a normal exit it removes background children left behind.
    _kill_group(proc.pid)
    returncode = proc.wait()
    return _Outcome(returncode, out, err, timed_out)


def _execute(
    command: list[str],
    cwd: Path,
    stdin: bytes,
    limits: Limits,
    extra: dict[str, str],
    *,
    sandbox: Sandbox | None,
) -> _Outcome | HandlerResult:
    """Run ``command``, in ``sandbox`` when one is given (see worker/sandbox)."""
    if sandbox is None:
        return _spawn(command, cwd, stdin, limits, extra)
    box = limits_for(limits)
    cgroup = sandbox.cgroup(box)
    if cgroup is None:
        return _spawn([*sandbox.run_prefix(cwd, box, None), *command], cwd, stdin, limits, extra)
    try:
        with cgroup as procs:
            prefix = sandbox.run_prefix(cwd, box, procs)
            return _spawn([*prefix, *command], cwd, stdin, limits, extra)
    except OSError as exc:
        return _failed(f"cannot set up the sandbox's pids cgroup: {exc}")


def _spawn(
    command: list[str], cwd: Path, stdin: bytes, limits: Limits, extra: dict[str, str]
) -> _Outcome | HandlerResult:
    env = {
        **extra,
        "PATH": _SAFE_PATH,
        "LANG": "C.UTF-8",
        "HOME": str(cwd),
        "TMPDIR": str(cwd / ".tmp"),
    }
    deadline = time.monotonic() + limits.timeout_s
    try:
        proc = subprocess.Popen(
            command,
            shell=False,
            cwd=cwd,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            close_fds=True,
        )
    except OSError as exc:
        return _failed(f"cannot start {command[0]}: {type(exc).__name__}: {exc}")
    try:
        return _pump(proc, stdin, limits.max_output_bytes, deadline)
    finally:
        if proc.returncode is None:
            _kill_group(proc.pid)
            proc.wait()
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()


def _prepare_workspace(workspace: Path) -> Path | str:
    """The resolved workspace with its ``.tmp`` directory, or why it is unusable."""
    root = workspace.resolve()
    if not root.is_dir():
        return f"the workspace {str(root)!r} is not a directory"
    tmp = root / ".tmp"
    try:
        tmp.mkdir(mode=0o700)
    except FileExistsError:
        if tmp.is_symlink() or not tmp.is_dir():
            return "the workspace's .tmp exists and is not a plain directory"
    except OSError as exc:
        return f"cannot create the workspace's .tmp: {exc}"
    return root


def _text(data: bytes) -> str:
    """UTF-8 with replacement; U+0000 replaced too (PostgreSQL jsonb cannot store it)."""
    return data.decode("utf-8", errors="replace").replace("\x00", "\ufffd")


def run(envelope: ExecutionEnvelope, _context: HandlerContext) -> ExecutionResult:
    """Run the step's argv under the connector's rule and limits; record the result."""
    return answer(envelope, _run(envelope))


def _run(envelope: ExecutionEnvelope) -> HandlerResult:
    limits = limits_of(envelope)
    spec = shell_input(envelope.arguments)  # the gate ran the same checks on the plan
    if isinstance(spec, str):
        return _failed(spec)
    stdin = (spec.stdin or "").encode("utf-8")

    rule = check_argv(spec.argv, envelope.gatehouse.connector)
    workspace = _prepare_workspace(envelope.workspace)
    if isinstance(workspace, str):
        return _failed(workspace)

    opa = envelope.gatehouse.opa  # an OPA run: the OPA_* variables, nothing else
    extra = {} if opa is None else opa_env(opa, workspace)
    found = current_sandbox()
    if isinstance(found, str):
        if envelope.gatehouse.unsandboxed_shell != "allowed":
            return HandlerResult(
                ok=False,
                output={"sandbox": {"tool": "none", "reason": found}},
                error_code=ErrorCode.SANDBOX_UNAVAILABLE,
                error_message=f"not run: {found}",
            )
        evidence: JsonObject = {"tool": "none", "reason": found, "allowed_by": "profile"}
        sandbox = None
    else:
        sandbox, evidence = found, found.profile(limits_for(limits))
    if not os.access(rule.path, os.X_OK):
        return _failed(f"cannot start {rule.path}: FileNotFoundError: no such program")
    if sandbox is not None and not rule.path.startswith(("/usr/", "/bin/", "/sbin/")):
        return _failed(f"cannot start {rule.path} in the sandbox: it shows only /usr")
    outcome = _execute(
        [rule.path, *spec.argv[1:]], workspace, stdin, limits, extra, sandbox=sandbox
    )
    if isinstance(outcome, HandlerResult):
        return outcome

    out, err = bytes(outcome.stdout.data), bytes(outcome.stderr.data)
    argv_json: list[JsonValue] = list(spec.argv)
    output: JsonObject = {
        "exit_code": outcome.returncode,
        "stdout": _text(out),
        "stderr": _text(err),
        "stdout_sha256": sha256_hex(out),
        "stderr_sha256": sha256_hex(err),
        "stdout_bytes": len(out),
        "stderr_bytes": len(err),
        "truncated": outcome.stdout.truncated or outcome.stderr.truncated,
        "argv": argv_json,
        "sandbox": evidence,
    }
    artifacts = (
        Artifact(name="stdout", media_type="text/plain", content=out),
        Artifact(name="stderr", media_type="text/plain", content=err),
    )
    if outcome.timed_out:
        return HandlerResult(
            ok=False,
            output=output,
            error_code=ErrorCode.HANDLER_TIMEOUT,
            error_message=f"{spec.argv[0]} ran past {limits.timeout_s}s and was killed",
            artifacts=artifacts,
        )
    if outcome.returncode != 0:
        return HandlerResult(
            ok=False,
            output=output,
            error_code=ErrorCode.HANDLER_FAILED,
            error_message=f"{spec.argv[0]} exited with {outcome.returncode}",
            artifacts=artifacts,
        )
    return HandlerResult(ok=True, output=output, artifacts=artifacts)
