"""A long-running server (``opencode serve``) in a bubblewrap sandbox.

What the server gets (``Jail.argv``):

* the same namespaces, user, capabilities and session as shell steps
  (``bwrap.py``): new user, mount, PID, IPC, UTS, cgroup and network namespaces,
  uid 65534, no capabilities, no new privileges, no further user namespaces, a
  new session, and it dies with the worker;
* read-only: ``/usr`` (and the merged-usr links), the harmless ``/etc`` files
  shell steps get, the CA certificates (``/etc/ssl``, ``/etc/ca-certificates``),
  its own ``/etc/hosts``, the OpenCode install (``vendor/opencode/node_modules``:
  the binary is self-contained, no ``node`` is needed) and the bridge script;
* writable: its own HOME (database, snapshots, caches) and the workspace root
  (where every run's workspace is); private ``/tmp``, ``/proc`` and ``/dev``;
  nothing else of the host: not the project, not the worker's state or
  environment (the supervisor passes only what OpenCode needs);
* network: none but loopback, plus the bridge (``bridge.py`` inside,
  ``relay.py`` outside): the worker reaches the API through ``api.sock``, and
  OpenCode reaches ``127.0.0.1:<provider port>``, which goes to the configured
  provider's host and port and nowhere else.

The provider is named by the URL OpenCode is given (``Route``). On loopback it
stays as it is. A provider by host name keeps its name (so TLS still checks
the provider's certificate): the sandbox's ``/etc/hosts`` maps the name to
127.0.0.1, where the bridge listens. A port below 1024 cannot be bound without
a capability, so such a port is moved up by 10000 inside (the TLS name is
unaffected; the Host header then carries the moved port). Untested here: this
machine reaches nothing on the internet, so only loopback providers are
exercised by the tests.

No rlimits are set on the server (it is long-running, and its runtime reserves
more address space than a shell step's limit): its CPU and memory are not
capped. Where a pids cgroup can be made (``cgroup.py``) the server and all it
starts share one, capped at ``SERVER_PROCESSES`` tasks (threads count), and
whatever is left in it is killed when the server stops.
"""

from __future__ import annotations

import ipaddress
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from contracts import JsonObject, JsonValue
from worker.sandbox.bwrap import NAMESPACES, Sandbox, current
from worker.sandbox.cgroup import ENTER, PidsCgroup
from worker.sandbox.relay import Relay

__all__ = [
    "BRIDGE", "PYTHON", "Jail", "Route", "probe_server_sandbox", "route_of", "server_sandbox",
]  # fmt: skip

BRIDGE = Path(__file__).resolve().with_name("bridge.py")
PYTHON = "/usr/bin/python3"  # the system's, inside the sandbox (only /usr is there)
_INSIDE = "/run/gatehouse"  # the socket folder, inside
_INSIDE_BRIDGE = "/opt/gatehouse/bridge.py"
_CERTS = ("/etc/ssl", "/etc/ca-certificates")
_LOW_PORT_SHIFT = 10000
_DEFAULT_PORTS = {"http": 80, "https": 443}
SERVER_PROCESSES = 1024  # tasks: OpenCode's own threads, its tools and what they start


@dataclass(frozen=True)
class Route:
    """The provider as the worker reaches it, and as OpenCode inside is told of it."""

    host: str  # where the relay connects, outside
    port: int
    inside_url: str  # the base URL OpenCode is configured with
    inside_port: int  # where the bridge listens, inside
    hosts_name: str | None  # a name /etc/hosts maps to 127.0.0.1, inside


def route_of(url: str) -> Route:
    parts = urlsplit(url)
    host = parts.hostname
    if host is None or parts.scheme not in _DEFAULT_PORTS:
        raise ValueError(f"the model URL {url!r} is not an http(s) URL with a host")
    port = parts.port or _DEFAULT_PORTS[parts.scheme]
    inside_port = port if port >= 1024 else port + _LOW_PORT_SHIFT
    try:
        literal: ipaddress.IPv4Address | ipaddress.IPv6Address | None = ipaddress.ip_address(host)
    except ValueError:
        literal = None
    if literal is None:
        inside_host, name = host, host  # the name stays: TLS checks it
    elif literal.version == 4 and literal.is_loopback:
        inside_host, name = host, None
    else:  # an address elsewhere (or IPv6): the bridge's address instead
        inside_host, name = "127.0.0.1", None
    netloc = f"{inside_host}:{inside_port}"
    if parts.username is not None:
        netloc = f"{parts.username}{':' + parts.password if parts.password else ''}@{netloc}"
    inside_url = urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))
    return Route(host, port, inside_url, inside_port, name)


def _hosts(name: str | None) -> str:
    lines = ["127.0.0.1\tlocalhost", "::1\tlocalhost"]
    if name is not None and name != "localhost":
        lines.append(f"127.0.0.1\t{name}")
    return "\n".join(lines) + "\n"


class Jail:
    """One start of a server in the sandbox: its socket folder, hosts file and relay.

    ``argv(program)`` is the command to start; ``relay.port`` is where the API is
    reached from the host once the server is ready; ``close()`` after it stopped.
    """

    def __init__(
        self,
        sandbox: Sandbox,
        *,
        install: Path,
        home: Path,
        workspace_root: Path,
        provider_url: str,
    ) -> None:
        self.sandbox = sandbox
        self.install = install
        self.home = home
        self.workspace_root = workspace_root
        self.route = route_of(provider_url)
        self.serve_port = 4096 if self.route.inside_port != 4096 else 4097
        # short: a unix socket's path has room for about 100 bytes
        self.folder = Path(tempfile.mkdtemp(prefix="gh-oc-"))
        (self.folder / "s").mkdir()
        (self.folder / "hosts").write_text(_hosts(self.route.hosts_name), "ascii")
        self.relay = Relay(self.folder / "s", (self.route.host, self.route.port))
        self._cgroup: PidsCgroup | None = None

    def argv(self, program: list[str]) -> list[str]:
        """bwrap, then the bridge, then ``program`` (an absolute path under ``install``)."""
        args = self.sandbox.base_args()
        for certs in _CERTS:
            if Path(certs).exists():
                args += ["--ro-bind", certs, certs]
        private_tmp = "/tmp"  # noqa: S108 - the sandbox's own tmpfs, not the host's
        home, root, install = str(self.home), str(self.workspace_root), str(self.install)
        args += ["--ro-bind", str(self.folder / "hosts"), "/etc/hosts",
                 "--dev", "/dev", "--proc", "/proc", "--tmpfs", private_tmp,
                 "--ro-bind", install, install,
                 "--bind", home, home, "--bind", root, root,
                 "--bind", str(self.folder / "s"), _INSIDE,
                 "--ro-bind", str(BRIDGE), _INSIDE_BRIDGE,
                 "--chdir", home, "--",
                 PYTHON, "-I", _INSIDE_BRIDGE, _INSIDE, str(self.route.inside_port),
                 str(self.serve_port), "--", *program]  # fmt: skip
        if self.sandbox.pids is not None and self._cgroup is None:
            cgroup = PidsCgroup(self.sandbox.pids, SERVER_PROCESSES)
            try:
                procs = cgroup.__enter__()  # left in close()
            except OSError:
                return args  # uncapped, and the evidence says so
            self._cgroup = cgroup
            args = [sys.executable, "-I", "-S", "-c", ENTER, str(procs), *args]
        return args

    def start_relay(self) -> None:
        self.relay.start()

    def evidence(self) -> JsonObject:
        """What is recorded in a turn's output: the sandbox the server runs in (once
        ``argv`` has been made)."""
        ns: list[JsonValue] = list(NAMESPACES)
        writable: list[JsonValue] = ["opencode_home", "workspace_root"]
        return {
            "tool": "bubblewrap",
            "version": self.sandbox.version,
            "namespaces": ns,
            "network": f"model provider only ({self.route.host}:{self.route.port}, bridged)",
            "uid": 65534,
            "capabilities": "none",
            "writable": writable,
            "limits": "none",
            "processes_enforced_by": "pids cgroup" if self._cgroup is not None else "none",
        }

    def close(self) -> None:
        """After the server stopped: anything left in its cgroup is killed."""
        self.relay.close()
        if self._cgroup is not None:
            self._cgroup.__exit__(None, None, None)
            self._cgroup = None
        shutil.rmtree(self.folder, ignore_errors=True)


@cache
def probe_server_sandbox(sandbox: Sandbox) -> str | None:
    """None when a server can be started in ``sandbox`` here, else why not: the
    bridge is really run in the server's layout with the system's Python."""
    if not Path(PYTHON).exists():
        return f"{PYTHON} is not installed (the sandbox's network bridge needs it)"
    with tempfile.TemporaryDirectory(prefix="gatehouse-probe-") as folder:
        base = Path(folder)
        for sub in ("install", "home", "ws"):
            (base / sub).mkdir()
        jail = Jail(sandbox, install=base / "install", home=base / "home",
                    workspace_root=base / "ws", provider_url="http://127.0.0.1:9/")  # fmt: skip
        try:
            argv = jail.argv([])
            start = argv.index(jail.sandbox.bwrap)  # after the cgroup's entry, if any
            probe = [*argv[start : argv.index(PYTHON)], PYTHON, "-I", _INSIDE_BRIDGE, "--probe"]
            done = subprocess.run(probe, capture_output=True, text=True, timeout=20,
                                  check=False, env={"PATH": "/usr/bin:/bin"})  # fmt: skip
        except (OSError, subprocess.SubprocessError) as exc:
            return f"the server sandbox could not be run: {type(exc).__name__}: {exc}"
        finally:
            jail.close()
    if done.returncode != 0 or done.stdout.strip() != "ok":
        reason = (done.stderr.strip() or f"exit {done.returncode}").splitlines()[0][:300]
        return f"the server sandbox does not start here: {reason}"
    return None


def server_sandbox() -> Sandbox | str:
    """The sandbox this worker's OpenCode server runs in, or why there is none
    (``GATEHOUSE_BWRAP`` as for shell steps, then the server's own probe)."""
    found = current()
    if isinstance(found, str):
        return found
    return probe_server_sandbox(found) or found
