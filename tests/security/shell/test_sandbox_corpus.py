"""Shell steps in the sandbox, against an allowlist that lets through far too much.

The connector here allows ``sh -c`` and ``python3 -c`` with any script: the
allowlist mistake the sandbox exists for. Each attempt tries one way out (writes
outside the workspace, links out of it, reading the worker's secrets and
environment, the network, signals, mounts, namespaces) or one bomb (fork, CPU,
memory, file size, output, open files). After every attempt the same canaries
are checked: a file outside the workspace and one in the host's /tmp unchanged,
a secret file and the worker's environment never in the output, loopback
listeners (TCP, UDP, an abstract socket) never reached, the host's name and a
host process untouched. Bombs must end within their limits.
"""

from __future__ import annotations

import base64
import os
import shutil
import socket
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from contracts import CommandRule, Connector, DriverKind, ErrorCode, JsonValue, Limits
from contracts.execution import ExecutionResult
from tests.support.handler_context import handler_context
from worker.coordinator.envelopes import build_envelope
from worker.handlers import restricted_shell
from worker.sandbox.bwrap import find_sandbox

OP_KEY = "ab" * 32
SECRET = "gh-secret-" + uuid.uuid4().hex
ENV_SECRET = "gh-env-secret-" + uuid.uuid4().hex
ANY = r"(?s)^.{1,4000}$"
RULES = [
    CommandRule(name="sh", path="/usr/bin/sh", arg_pattern=ANY, allowed_flags=["-c"]),
    CommandRule(name="python3", path="/usr/bin/python3", arg_pattern=ANY, allowed_flags=["-c"]),
    CommandRule(name="yes", path="/usr/bin/yes", arg_pattern=ANY),
]

if os.environ.get("CI") and isinstance(find_sandbox(None), str):
    pytest.fail(f"the gate needs the sandbox: {find_sandbox(None)}")  # mise run setup:sandbox
pytestmark = pytest.mark.skipif(
    isinstance(find_sandbox(None), str),
    reason=f"no sandbox on this machine ({find_sandbox(None)}); mise run setup:sandbox",
)


@dataclass
class Canaries:
    root: Path
    workspace: Path
    outside: Path
    secret: Path
    host_tmp: Path
    tcp_port: int
    udp_port: int
    abstract: str
    host_pid: int
    hits: list[str] = field(default_factory=list)

    def check(self, out: str) -> None:
        assert self.outside.read_text() == "original", "a file outside the workspace changed"
        assert sorted(p.name for p in self.outside.parent.iterdir()) == ["canary.txt"]
        assert not self.host_tmp.exists(), "the host's /tmp was written"
        assert SECRET not in out, "the secret file was read"
        assert ENV_SECRET not in out, "the worker's environment was read"
        assert self.hits == [], f"a loopback listener was reached: {self.hits}"
        assert socket.gethostname() != "pwned", "the host's name changed"
        os.kill(self.host_pid, 0)  # the host process still lives


def _listen(c: Canaries) -> Callable[[], None]:
    tcp = socket.socket()
    tcp.bind(("127.0.0.1", 0))
    tcp.listen()
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind(("127.0.0.1", 0))
    unix = socket.socket(socket.AF_UNIX)
    unix.bind("\0" + c.abstract)
    unix.listen()
    c.tcp_port, c.udp_port = tcp.getsockname()[1], udp.getsockname()[1]
    stop = threading.Event()

    def watch(sock: socket.socket, name: str, dgram: bool) -> None:
        sock.settimeout(0.2)
        while not stop.is_set():
            try:
                if dgram:
                    sock.recvfrom(100)
                else:
                    sock.accept()[0].close()
                c.hits.append(name)
            except (TimeoutError, OSError):
                continue

    threads = [threading.Thread(target=watch, args=a, daemon=True)
               for a in ((tcp, "tcp", False), (udp, "udp", True), (unix, "abstract", False))]  # fmt: skip
    for t in threads:
        t.start()

    def close() -> None:
        stop.set()
        for t in threads:
            t.join(2)
        for s in (tcp, udp, unix):
            s.close()

    return close


@pytest.fixture
def canaries(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Canaries]:
    monkeypatch.setenv("GATEHOUSE_CANARY", ENV_SECRET)
    ws = tmp_path / "ws"
    ws.mkdir()
    outside = tmp_path / "outside" / "canary.txt"
    outside.parent.mkdir()
    outside.write_text("original")
    secret = tmp_path / "secret.txt"
    secret.write_text(SECRET)
    host = subprocess.Popen(["sleep", "300"])
    c = Canaries(tmp_path, ws.resolve(), outside, secret, Path(f"/tmp/gh-escape-{uuid.uuid4().hex}"),
                 0, 0, f"gh-canary-{uuid.uuid4().hex}", host.pid)  # fmt: skip
    close = _listen(c)
    try:
        yield c
    finally:
        close()
        host.kill()
        host.wait()
        if c.host_tmp.exists():
            c.host_tmp.unlink()


def run(c: Canaries, argv: list[str], timeout_s: float = 5.0, cap: int = 65536) -> ExecutionResult:
    connector = Connector(
        connector_id="too-open",
        driver_kind=DriverKind.RESTRICTED_SHELL,
        description="an allowlist mistake",
        limits=Limits(timeout_s=timeout_s, max_output_bytes=cap),
        commands=RULES,
    )
    envelope = build_envelope(run_id="run-1", step_id="s1", op_key=OP_KEY, attempt=1,
                              connector=connector, arguments={"argv": list[JsonValue](argv)}).bound(c.workspace)  # fmt: skip
    return restricted_shell.run(envelope, handler_context())


def py(code: str) -> list[str]:
    """A python3 -c argv for a script with newlines (argv items may not hold them)."""
    blob = base64.urlsafe_b64encode(code.encode()).decode()
    return ["python3", "-c", f"import base64;exec(base64.urlsafe_b64decode('{blob}'))"]


def text(result: ExecutionResult) -> str:
    o = result.output
    return f"{o.get('stdout', '')}{o.get('stderr', '')}"


# name -> script builder (from the canaries' paths and ports); each must be contained.
ESCAPES: dict[str, Callable[[Canaries], list[str]]] = {
    "write outside by absolute path": lambda c: ["sh", "-c", f"echo pwned > {c.outside}"],
    "append outside": lambda c: ["sh", "-c", f"echo pwned >> {c.outside}"],
    "new file beside the canary": lambda c: ["sh", "-c", f"touch {c.outside.parent}/new"],
    "delete the canary": lambda c: ["sh", "-c", f"rm -f {c.outside}"],
    "climb with ..": lambda c: ["sh", "-c", "cd .. && echo pwned > outside/canary.txt"],
    "climb far with ..": lambda c: [
        "sh",
        "-c",
        "for i in 1 2 3 4 5 6 7 8; do cd ..; done; ls; touch pwned",
    ],
    "symlink out, then write": lambda c: ["sh", "-c", f"ln -s {c.outside} l; echo pwned > l"],
    "symlink to the root": lambda c: ["sh", "-c", "ln -s / r; cat r/etc/shadow; ls r/root"],
    "hard link out": lambda c: ["sh", "-c", f"ln {c.outside} h && echo pwned > h"],
    "read the secret file": lambda c: ["sh", "-c", f"cat {c.secret}"],
    "find the secret": lambda c: ["sh", "-c", "grep -r gh-secret- / 2>/dev/null | head"],
    "host /tmp": lambda c: ["sh", "-c", f"echo pwned > {c.host_tmp}"],
    "worker environment": lambda c: ["sh", "-c", "env; cat /proc/1/environ"],
    "worker environ by pid": lambda c: ["sh", "-c", f"cat /proc/{os.getpid()}/environ"],
    "every environ": lambda c: ["sh", "-c", "cat /proc/*/environ"],
    "parent environ": lambda c: py(
        "import os\nprint(open(f'/proc/{os.getppid()}/environ').read())"
    ),
    "tcp to the canary": lambda c: py(
        f"import socket\nsocket.create_connection(('127.0.0.1', {c.tcp_port}), 2)"
    ),
    "udp to the canary": lambda c: py(
        f"import socket\ns=socket.socket(2,2)\ns.sendto(b'x',('127.0.0.1',{c.udp_port}))"
    ),
    "abstract unix socket": lambda c: py(
        f"import socket\ns=socket.socket(socket.AF_UNIX)\ns.connect('\\0{c.abstract}')"
    ),
    "postgres port": lambda c: py(
        "import socket\nsocket.create_connection(('127.0.0.1', 5432), 2)"
    ),
    "postgres unix socket": lambda c: ["sh", "-c", "ls /var/run/postgresql /run/postgresql"],
    "outside address": lambda c: py("import socket\nsocket.create_connection(('1.1.1.1', 53), 2)"),
    "list interfaces": lambda c: ["sh", "-c", "cat /proc/net/dev; ip addr 2>&1"],
    "kill everything": lambda c: ["sh", "-c", "kill -9 -1"],
    "kill the host process": lambda c: ["sh", "-c", f"kill -9 {c.host_pid}"],
    "kill the worker": lambda c: ["sh", "-c", f"kill -9 {os.getpid()}"],
    "rename the host": lambda c: [
        "sh",
        "-c",
        "hostname pwned; echo pwned > /proc/sys/kernel/hostname",
    ],
    "mount a tmpfs": lambda c: ["sh", "-c", "mount -t tmpfs x /usr"],
    "nested namespaces": lambda c: ["sh", "-c", "unshare -r sh -c 'mount -t tmpfs x /usr'"],
    "chroot": lambda c: ["sh", "-c", "chroot / true"],
    "write to /usr": lambda c: ["sh", "-c", "echo pwned > /usr/bin/gh-pwned"],
    "write to /etc": lambda c: ["sh", "-c", "echo pwned >> /etc/passwd"],
    "read /etc/shadow": lambda c: ["sh", "-c", "cat /etc/shadow"],
    "the project folder": lambda c: [
        "sh",
        "-c",
        f"ls {Path.cwd()}; cat {Path.cwd()}/var/tokens.json",
    ],
    "the home folder": lambda c: ["sh", "-c", "ls -la /root /home"],
    "sys and cgroups": lambda c: [
        "sh",
        "-c",
        "ls /sys/fs/cgroup; echo $$ > /sys/fs/cgroup/cgroup.procs",
    ],
    "devices": lambda c: ["sh", "-c", "ls /dev/sda /dev/mem /dev/kmsg; mknod x b 8 0"],
    "inherited descriptors": lambda c: [
        "sh",
        "-c",
        "ls /proc/self/fd; echo pwned >&3; echo pwned >&5",
    ],
    "setuid bit": lambda c: ["sh", "-c", "cp /usr/bin/id i; chmod u+s i; ./i"],
    "outlive the step": lambda c: [
        "sh",
        "-c",
        f"(sleep 2; echo pwned > {c.outside}; touch late) & exit 0",
    ],
    "daemonize": lambda c: py(
        "import os,time\nif os.fork(): os._exit(0)\nos.setsid()\nif os.fork(): os._exit(0)\n"
        "time.sleep(2)\nopen('late','w').write('x')"
    ),
    "ptrace the parent": lambda c: py(
        "import ctypes,os\nlibc=ctypes.CDLL(None)\nprint(libc.ptrace(16, os.getppid(), 0, 0))"
    ),
}


@pytest.mark.parametrize("name", list(ESCAPES))
def test_escape_attempts_are_contained(canaries: Canaries, name: str) -> None:
    result = run(canaries, ESCAPES[name](canaries))
    box = result.output["sandbox"]
    assert isinstance(box, dict) and box["tool"] == "bubblewrap"
    if name in ("outlive the step", "daemonize"):
        time.sleep(3)  # a process left behind would act now
        assert not (canaries.workspace / "late").exists(), "a process outlived its step"
    canaries.check(text(result))


def test_the_sandbox_holds_what_it_says(canaries: Canaries) -> None:
    """The positive side: the workspace is writable, the program sees its own ids."""
    result = run(canaries, py(
        "import os\nopen('made','w').write('ok')\n"
        "print(os.getuid(), os.getgid(), os.getpid() < 10, open('/proc/self/status').read())"))  # fmt: skip
    assert result.status == "success", text(result)
    assert (canaries.workspace / "made").read_text() == "ok"
    out = str(result.output["stdout"])
    assert out.startswith("65534 65534 True")
    assert "NoNewPrivs:\t1" in out and "CapEff:\t0000000000000000" in out
    canaries.check(text(result))


# Marks the bombs' own processes, so a check for leftovers finds theirs and no other's.
MARK = f"{uuid.uuid4().int % 10**6:06d}"
FORK_BOMB = py(f"import os\n# {MARK}\nwhile True:\n  try: os.fork()\n  except OSError: pass")
BOMBS: dict[str, tuple[list[str], float]] = {
    "fork bomb": (FORK_BOMB, 4.0),
    "cpu bomb": (py("while True: pass"), 3.0),
    "memory bomb": (py("b = bytearray(4 << 30)\nprint(len(b))"), 5.0),
    "file size bomb": (["sh", "-c", "head -c 300000000 /dev/zero > big"], 10.0),
    "output bomb": (["yes", "y"], 2.0),
    "open files bomb": (py("fs=[open('f','w') for _ in range(100000)]\nprint(len(fs))"), 5.0),
    "process tree bomb": (
        ["sh", "-c", f"for i in $(seq 1 500); do sleep 30.{MARK} & done; wait"],
        3.0,
    ),
}


@pytest.mark.parametrize("name", list(BOMBS))
def test_bombs_end_within_their_limits(canaries: Canaries, name: str) -> None:
    argv, timeout = BOMBS[name]
    started = time.monotonic()
    result = run(canaries, argv, timeout_s=timeout)
    took = time.monotonic() - started
    assert took < timeout + 5, f"{name} ran {took:.1f} s past a {timeout} s timeout"
    assert result.status != "success" or name == "process tree bomb", text(result)[:300]
    if name == "file size bomb":
        assert (canaries.workspace / "big").stat().st_size <= 300_000_000 // 4
    if name == "output bomb":
        assert result.output["truncated"] is True
        assert int(str(result.output["stdout_bytes"])) <= 65536
    if name == "open files bomb":
        assert "Too many open files" in text(result)
    if name == "memory bomb":
        assert "MemoryError" in text(result)
    if name in ("fork bomb", "process tree bomb"):
        # Every process of the step was sent SIGKILL when it ended; the kernel takes a
        # moment to tear down a tree of thousands on a loaded machine (it once had 54
        # left after 0.5 s, gone a moment later). Not one may still run 10 s on: one
        # that did would have escaped the kill.
        ours = f"^sleep 30\\.{MARK}$|{FORK_BOMB[-1][-60:].replace('(', '.').replace(')', '.')}"
        deadline = time.monotonic() + 10
        while True:
            time.sleep(0.5)
            left = subprocess.run(["pgrep", "-f", ours], capture_output=True,
                                  text=True, check=False).stdout.split()  # fmt: skip
            if not left or time.monotonic() > deadline:
                break
        info = subprocess.run(["ps", "-o", "pid,ppid,stat,args", "-p", ",".join(left) or "1"],
                              capture_output=True, text=True, check=False).stdout  # fmt: skip
        assert left == [], f"processes outlived the step: {info}"
    canaries.check(text(result))


def test_without_a_sandbox_shell_steps_are_refused(
    canaries: Canaries, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GATEHOUSE_BWRAP", "off")
    result = run(canaries, ["sh", "-c", "touch ran"])
    assert result.status != "success" and result.error is not None
    assert result.error.code == ErrorCode.SANDBOX_UNAVAILABLE.value
    assert not (canaries.workspace / "ran").exists()  # not run bare
    assert shutil.which("bwrap") is not None  # refused by setting, the machine has one


def test_a_profile_may_allow_shell_steps_without_a_sandbox_in_so_many_words(
    canaries: Canaries, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GATEHOUSE_BWRAP", "off")
    connector = Connector(connector_id="c", driver_kind=DriverKind.RESTRICTED_SHELL,
                          description="bare", limits=Limits(timeout_s=5, max_output_bytes=4096),
                          commands=RULES)  # fmt: skip
    envelope = build_envelope(run_id="run-1", step_id="s1", op_key=OP_KEY, attempt=1,
                              connector=connector, arguments={"argv": ["sh", "-c", "touch ran"]},
                              unsandboxed_shell="allowed").bound(canaries.workspace)  # fmt: skip
    result = restricted_shell.run(envelope, handler_context())
    assert result.status == "success"
    assert (canaries.workspace / "ran").exists()
    assert result.output["sandbox"] == {
        "tool": "none", "reason": "GATEHOUSE_BWRAP=off: this worker runs no sandbox",
        "allowed_by": "profile",
    }  # fmt: skip
    # and the envelope says so, while one that does not say it serializes as before
    assert (
        envelope.model_dump(mode="json")["extensions"]["gatehouse"]["unsandboxed_shell"]
        == "allowed"
    )
    plain = build_envelope(run_id="run-1", step_id="s1", op_key=OP_KEY, attempt=1,
                           connector=connector, arguments={})  # fmt: skip
    assert "unsandboxed_shell" not in plain.model_dump(mode="json")["extensions"]["gatehouse"]
