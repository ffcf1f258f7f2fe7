"""``python -m bench.hitl.profile``: where a run's time and CPU go, by package and function.

Issue 29 ("profile first"). One shim and one worker (separate processes, shipped
defaults), each backend on a fresh database; a few runs to warm up, then
``--runs`` sequential template runs (3 noop steps: submit, approve when the card
appears, until ``succeeded``) while ``py-spy`` samples both processes twice over:

* **CPU** (``py-spy --gil``): only the thread holding the GIL is sampled, so a
  sample is Python work being done (C code called with the GIL held included);
* **wall** (no ``--gil``): every thread that is not idle, so waiting on the
  database's answer shows too (psycopg's wait for a reply is not an idle state to
  py-spy).

Each sample is charged to the package its innermost frame is in (its *own* share)
and to every function on its stack (*inclusive*). The raw stacks (the collapsed
format ``speedscope`` and ``flamegraph.pl`` read) are kept in ``--keep``
(``var/bench/profile`` by default). Results go between this module's markers in
``--out`` (``docs/benchmarks.md``); nothing is judged here.
"""

from __future__ import annotations

import argparse
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from bench.hitl.gatehouse import GatehouseSystem
from bench.hitl.report import write_section
from tests.support.stack import drop_database, fresh_database_url, postgres_available

__all__ = ["Profile", "main", "read_collapsed"]

BEGIN = "<!-- bench:profile begin -->"
END = "<!-- bench:profile end -->"
RATE_HZ = 250
WARM_UP = 5
PROCESSES = ("shim", "worker")
KINDS = ("cpu", "wall")

# What a frame's file says about whose code it is, first match wins.
PACKAGES = (
    ("sqlalchemy", "/sqlalchemy/"),
    ("psycopg", "/psycopg/"),
    ("psycopg", "/psycopg_pool/"),
    ("dbos", "/dbos/"),
    ("pydantic", "/pydantic"),
    ("jsonschema", "/jsonschema/"),
    ("jsonschema", "/referencing/"),
    ("http server", "/uvicorn/"),
    ("http server", "/starlette/"),
    ("http server", "/fastapi/"),
    ("http server", "/anyio/"),
    ("http server", "/h11/"),
    ("gatehouse ledger", "/ledger/"),
    ("gatehouse worker", "/worker/"),
    ("gatehouse shim", "/shim/"),
    ("gatehouse contracts", "/contracts/"),
    ("gatehouse policies", "/policies/"),
    ("stdlib json", "/json/"),
    ("stdlib threading", "threading.py"),
    ("stdlib concurrent", "/concurrent/"),
    ("stdlib logging", "/logging/"),
    ("sqlite3", "/sqlite3/"),
)
_FRAME = re.compile(r"^(?P<fn>.*) \((?P<file>[^()]*?)(?::\d+)?\)$")
# The pools' liveness checks of a connection as it is checked out: Gatehouse's
# (ledger's ``still_open``, no round trip) and SQLAlchemy's ``pool_pre_ping`` (a round
# trip; no pool of Gatehouse's has it now, so a share here is a regression).
PING = ("still_open", "do_ping")


@dataclass
class Profile:
    """Samples of one process, one kind: by package (own) and by function (inclusive)."""

    samples: int = 0
    own: Counter[str] = field(default_factory=Counter)
    inclusive: Counter[str] = field(default_factory=Counter)
    # each sample charged to the innermost Gatehouse function on its stack: the one
    # whose call (into SQLAlchemy, DBOS, pydantic…) the work was done for
    caller: Counter[str] = field(default_factory=Counter)

    def share(self, counter: Counter[str], key: str) -> float:
        return 100.0 * counter[key] / self.samples if self.samples else 0.0


def _package(file: str) -> str:
    path = "/" + file  # py-spy names a library's file from its package: sqlalchemy/…
    for name, marker in PACKAGES:
        if marker in path:
            return name
    return "other"


def read_collapsed(text: str) -> Profile:
    """A profile from py-spy's raw (collapsed) output: ``frame;frame;… count`` per line,
    outermost frame first; a frame is ``function (file:line)``."""
    p = Profile()
    for line in text.splitlines():
        stack, _, count = line.rstrip().rpartition(" ")
        if not stack or not count.isdigit():
            continue
        n = int(count)
        frames = [_FRAME.match(f) for f in stack.split(";")]
        p.samples += n
        leaf = frames[-1]
        p.own[_package(leaf["file"]) if leaf else "other"] += n
        seen: set[str] = set()
        innermost = "(no Gatehouse frame)"
        for m in frames:
            if m is None:
                continue
            key = f"{m['fn']} ({_where(m['file'])})"
            if _ours(key):
                innermost = key
            if key not in seen:
                seen.add(key)
                p.inclusive[key] += n
        p.caller[innermost] += n
    return p


def _where(file: str) -> str:
    """A frame's file as a path from its package's root (site-packages or the repo)."""
    if "site-packages/" in file:
        return file.rsplit("site-packages/", 1)[1]
    for top in ("ledger", "worker", "shim", "contracts", "policies"):
        if f"/{top}/" in file:
            return top + "/" + file.rsplit(f"/{top}/", 1)[1]
    return file


def _ours(key: str) -> bool:
    return bool(re.search(r"\((ledger|worker|shim|contracts|policies)/", key))


def _record(pid: int, out: Path, gil: bool) -> subprocess.Popen[bytes]:
    spy = shutil.which("py-spy", path=str(Path(sys.executable).parent)) or "py-spy"
    cmd = [spy, "record", "-p", str(pid), "-f", "raw", "-r", str(RATE_HZ), "-o", str(out)]
    cmd += ["--nonblocking", *(["--gil"] if gil else [])]
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def profile(backend: str, url: str, tmp: Path, runs: int, keep: Path) -> dict[str, object]:
    """Both kinds of profile of ``runs`` sequential runs on one backend."""
    g = GatehouseSystem(backend, url, tmp)
    found: dict[str, object] = {}
    try:
        for _ in range(WARM_UP):
            g.one_run()
        for kind in KINDS:
            files = {role: keep / f"{backend}-{role}-{kind}.txt" for role in PROCESSES}
            spies = [
                _record(pid, files[r], kind == "cpu")
                for r, pid in zip(PROCESSES, g.pids(), strict=True)
            ]
            time.sleep(1.0)  # py-spy attached
            started = time.perf_counter()
            for _ in range(runs):
                g.one_run()
            ms = (time.perf_counter() - started) * 1000 / runs
            for spy in spies:
                spy.send_signal(signal.SIGINT)
            for role, spy in zip(PROCESSES, spies, strict=True):
                _, err = spy.communicate(timeout=60)
                if not files[role].exists():
                    raise RuntimeError(
                        f"py-spy wrote nothing: {err.decode(errors='replace')[-500:]}"
                    )
            found[f"{kind} ms/run"] = ms
            for role in PROCESSES:
                found[f"{role} {kind}"] = read_collapsed(files[role].read_text())
    finally:
        g.close()
    return found


def section(found: dict[str, dict[str, object]], runs: int) -> str:
    when = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        BEGIN,
        "## Where a run's time goes: sampled profiles (issue 29)",
        "",
        "Written by `npx -y @jdxcode/mise run bench:profile` (`bench/hitl/profile.py`);"
        " do not edit by hand.",
        "",
        f"* when: {when}; one shim and one worker (separate processes, shipped defaults),"
        f" {runs} sequential template runs (3 noop steps, submitted, approved when the card"
        f" appears, until `succeeded`) per profile, py-spy at {RATE_HZ} Hz on both processes",
        "* **CPU**: `py-spy --gil` (only the thread holding the GIL: Python work being done);"
        " **wall**: every thread not idle (waiting on the database's answer included)",
        "* raw stacks (collapsed; speedscope or flamegraph.pl read them): `var/bench/profile/`",
        "",
        "Own share by package: the samples whose innermost frame is that package's code.",
        "",
        "| backend | process | kind | samples | ms/run while sampled | top packages (own share) |"
        " pool's checkout check (inclusive) |",
        "|---|---|---|---|---|---|---|",
    ]
    for backend, f in found.items():
        for role in PROCESSES:
            for kind in KINDS:
                p = f[f"{role} {kind}"]
                assert isinstance(p, Profile)
                top = ", ".join(f"{k} {p.share(p.own, k):.0f} %" for k, _ in p.own.most_common(5))
                # nested ping frames hold the same samples: the outermost's count
                pings = (c for k, c in p.inclusive.items() if k.split(" (")[0].endswith(PING))
                ping = max(pings, default=0)
                ping_share = 100.0 * ping / p.samples if p.samples else 0.0
                ms = f[f"{kind} ms/run"]
                lines.append(
                    f"| {backend} | {role} | {kind} | {p.samples:,} | {ms:.0f} | {top}"
                    f" | {ping_share:.1f} % |"
                )
    lines += [
        "",
        "Which of Gatehouse's functions the worker's samples were for: each sample charged"
        " to the innermost Gatehouse function on its stack (the one whose call into"
        " SQLAlchemy, DBOS, pydantic… did the work), the ten largest:",
        "",
    ]
    for backend, f in found.items():
        for kind in KINDS:
            p = f[f"worker {kind}"]
            assert isinstance(p, Profile)
            lines.append(f"* {backend}, {kind}:")
            lines += [
                f"  * {p.share(p.caller, key):.1f} % `{key}`" for key, _ in p.caller.most_common(10)
            ]
    lines += ["", NOTES, END, ""]
    return "\n".join(lines)


NOTES = """What the figures mean:

* `sqlalchemy` includes the SQLite engine's own work: `sqlite3` is C code called from
  SQLAlchemy's frames, so on SQLite it is most of that share.
* `AnswerBoundConnection.wait` is Gatehouse's bound on psycopg's wait for the server's
  answer (`ledger/_net.py`): time in it is the database's round trips, not CPU.
* `(no Gatehouse frame)`: DBOS's own threads (its queue poll, the step records it
  writes around each step, its notifier) and the HTTP server's.
* The pool's checkout check is how a connection taken from a pool is known to be
  usable, so that one the database dropped (a restart) is replaced, not failed on:
  on PostgreSQL Gatehouse's `still_open` (`ledger/_net.py`), a look at the socket
  with no round trip, in every pool of both processes; on SQLite nothing (a file
  has no session to lose: DBOS's own engine is made without SQLAlchemy's
  `pool_pre_ping`, which sent a statement per transaction).
* The benchmark's own statement counters (`bench/hitl/_counting.py`) run in both
  processes and take 1 to 4 % of the samples.
"""


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.hitl.profile")
    ap.add_argument("--runs", type=int, default=60, help="sequential runs per profile")
    ap.add_argument("--backends", default="sqlite,postgres", help="comma-separated")
    ap.add_argument("--keep", default="var/bench/profile", help="where the raw stacks go")
    ap.add_argument("--out", default=None, help="write the section into this file")
    args = ap.parse_args(argv)
    backends = [b for b in args.backends.split(",") if b]
    if "postgres" in backends and not postgres_available():
        print("bench.hitl.profile: PostgreSQL is not reachable", file=sys.stderr)
        return 2
    keep = Path(args.keep)
    keep.mkdir(parents=True, exist_ok=True)
    found: dict[str, dict[str, object]] = {}
    with tempfile.TemporaryDirectory(prefix="gh-profile-") as tmp_name:
        for backend in backends:
            tmp = Path(tmp_name) / backend
            url = fresh_database_url(backend, tmp)
            try:
                print(f"{backend}: {args.runs} runs per profile", flush=True)
                found[backend] = profile(backend, url, tmp, args.runs, keep)
            finally:
                drop_database(url)
    text = section(found, args.runs)
    print(text)
    if args.out:
        write_section(Path(args.out), text, BEGIN, END)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
