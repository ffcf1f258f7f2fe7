"""The OCI image (``deploy/Containerfile``) under Debian's podman: built, migrating a
database, serving the shim off loopback with HTTPS beside two workers, its health
checks (``deploy/healthcheck.py``, what ``deploy/compose.yaml`` runs) passing, and a
run submitted, approved and executed through it.

Skipped, saying why, only where there is nothing to test: podman or runc is not
installed, or (without ``IMAGE_TEST=1``) the long half is not asked for. Anything
else that goes wrong once podman is here (it cannot run a container, the base
cannot be made, the build or the stack breaks) fails. As measured here:

* podman 4.3 runs containers on this machine kind only with runc, cgroupfs and
  explicit ulimits (crun refuses the hybrid cgroups; the default ulimits are refused);
* no image registry is reachable, so the Debian base is made locally
  (``deploy/base-image.sh``: debootstrap then ``podman import``, 96 s once);
* the build installs Debian's packages and Gatehouse's from PyPI (80-98 s here, then
  22-34 s to all healthy and a run done), too long for every gate: it runs when
  ``IMAGE_TEST=1`` (``deploy/image-test.sh`` sets it), and skips saying so otherwise.
"""

from __future__ import annotations

import json
import os
import shutil
import ssl
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from contracts import JsonObject, Role
from shim.local import free_port
from shim.tokens import add_token
from tests.support.tls import self_signed

ROOT = Path(__file__).resolve().parents[2]
BASE = os.environ.get("IMAGE_TEST_BASE", "localhost/debian:bookworm")
IMAGE = "localhost/gatehouse:image-test"
# What podman needs on this machine kind (docs/operators.md, "Deployment").
PODMAN = ["podman", "--runtime", "runc", "--cgroup-manager", "cgroupfs"]
RUN = [
    *("--ulimit", "nofile=1024:1024", "--ulimit", "nproc=1024:1024"),
    *("--network", "host"),  # the test's PostgreSQL listens on the host's loopback
]
# As deploy/kubernetes/ runs the shim and the workers: a read-only root file system,
# only /tmp (podman's own tmpfs under --read-only) and var/ writable.
READ_ONLY = ["--read-only"]
# The CA bundle pip trusts in the build: this machine's (a TLS-inspecting egress).
CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")


def _podman(*argv: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*PODMAN, *argv], capture_output=True, text=True, check=False, timeout=timeout
    )


def _last_line(done: subprocess.CompletedProcess[str]) -> str:
    lines = (done.stderr or done.stdout).strip().splitlines()
    return lines[-1] if lines else f"exit {done.returncode}"


def _podman_absent() -> str | None:
    """Why there is no podman to test the image with here, or None."""
    if shutil.which("podman") is None or shutil.which("runc") is None:
        return "podman or runc is not installed (apt-get install podman runc)"
    return None


def _base_image() -> str:
    """The Debian base, made from the Debian mirror when it is missing (no registry is
    reachable here). A base that cannot be made fails: podman is here."""
    if _podman("image", "exists", BASE).returncode != 0:
        made = subprocess.run(
            ["bash", str(ROOT / "deploy" / "base-image.sh")],
            capture_output=True,
            text=True,
            check=False,
            timeout=900,
        )
        assert made.returncode == 0, made.stdout[-2000:] + made.stderr[-2000:]
    return BASE


def test_podman_runs_a_container_here() -> None:
    """The fast half, in every gate where podman is installed: it can start a
    container here (of the base when there is one, else of nothing but its own
    runtime check). Podman present but unable to run one is a failure."""
    reason = _podman_absent()
    if reason:
        pytest.skip(reason)
    info = _podman("info", timeout=60)
    assert info.returncode == 0, f"podman cannot run here: {_last_line(info)}"
    if _podman("image", "exists", BASE).returncode == 0:
        done = _podman("run", "--rm", *RUN, BASE, "true", timeout=60)
        assert done.returncode == 0, f"podman cannot run a container here: {_last_line(done)}"


@pytest.fixture(scope="module")
def image() -> Iterator[str]:
    reason = _podman_absent()
    if reason:
        pytest.skip(reason)
    if os.environ.get("IMAGE_TEST") != "1":
        pytest.skip(
            "building and starting the image takes about two minutes here (build 80-98 s,"
            " start and a run 22-34 s, measured): set IMAGE_TEST=1, or run"
            " deploy/image-test.sh"
        )
    base = _base_image()
    ran = _podman("run", "--rm", *RUN, base, "true", timeout=60)
    assert ran.returncode == 0, f"podman cannot run a container here: {_last_line(ran)}"
    ca = ["-v", f"{CA_BUNDLE}:/run/build-ca.pem:ro", "--build-arg", "PIP_CERT=/run/build-ca.pem"]
    done = _podman(
        "build",
        *RUN,
        *(ca if CA_BUNDLE.is_file() else []),
        *("--build-arg", f"BASE_IMAGE={base}", "-f", "deploy/Containerfile", "-t", IMAGE),
        str(ROOT),
        timeout=1500,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    yield IMAGE


def _secrets(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """The shim's certificate and tokens file, readable by the image's user (10001),
    and the tokens of a submitter and an approver."""
    folder = tmp_path / "secrets"
    folder.mkdir()
    tls = self_signed(folder)
    people = {
        "sam": add_token(folder / "tokens.json", "sam", [Role.SUBMITTER]),
        "ada": add_token(folder / "tokens.json", "ada", [Role.APPROVER]),
    }
    for path in (tls.cert, tls.key):
        path.rename(folder / ("shim.pem" if path == tls.cert else "shim.key"))
    folder.chmod(0o755)
    for path in folder.iterdir():
        path.chmod(0o644)
    return folder, people


def _wait_status(http: httpx.Client, run_id: str, token: str, wanted: set[str]) -> JsonObject:
    deadline = time.monotonic() + 120  # a bound on the wait, not a speed assertion
    while True:
        r = http.get(f"/runs/{run_id}", headers={"Authorization": f"Bearer {token}"})
        assert r.status_code == 200, r.text
        view: JsonObject = r.json()
        if view["status"] in wanted:
            return view
        assert time.monotonic() < deadline, view
        time.sleep(0.5)


@pytest.mark.timeout(1800)
def test_the_image_serves_a_stack(image: str, pg_url: str, tmp_path: Path) -> None:
    env = ["-e", f"GATEHOUSE_DATABASE_URL={pg_url}"]
    # off loopback without a certificate: refused, as outside a container
    done = _podman("run", "--rm", *RUN, image, "shim", "--host", "0.0.0.0")
    assert done.returncode == 2, done
    assert "refusing to serve plain HTTP on 0.0.0.0" in done.stderr

    done = _podman("run", "--rm", *RUN, *env, image, "migrate", "--wait-for-database=60")
    assert done.returncode == 0, done
    secrets, people = _secrets(tmp_path)
    port = free_port()
    tag = uuid.uuid4().hex[:8]
    names = [f"gh-shim-{tag}", f"gh-worker-1-{tag}", f"gh-worker-2-{tag}"]
    mount = ["-v", f"{secrets}:/run/gatehouse:ro"]
    shim = [
        *("shim", "--host", "0.0.0.0", "--port", str(port)),
        *("--tls-cert", "/run/gatehouse/shim.pem", "--tls-key", "/run/gatehouse/shim.key"),
        *("--tokens-file", "/run/gatehouse/tokens.json"),
    ]
    try:
        var = ["--tmpfs", "/srv/gatehouse/var"]  # the shim's var/: an emptyDir in Kubernetes
        started = _podman(
            "run", "-d", "--name", names[0], *RUN, *READ_ONLY, *var, *env, *mount, image, *shim
        )
        assert started.returncode == 0, started
        for n, name in enumerate(names[1:], 1):
            worker = [*env, "-e", f"GATEHOUSE_EXECUTOR_ID=worker-{n}"]
            # as compose.yaml: the worker's var/ (workspaces) on a named volume of its own
            worker += ["-v", f"{name}:/srv/gatehouse/var"]
            started = _podman(
                "run", "-d", "--name", name, *RUN, *READ_ONLY, *worker, image, "worker"
            )
            assert started.returncode == 0, started
        checks = {
            names[0]: [
                *("python", "/opt/gatehouse/healthcheck.py", "readyz"),
                *(f"https://127.0.0.1:{port}", "/run/gatehouse/shim.pem"),
            ],
            names[1]: ["python", "/opt/gatehouse/healthcheck.py", "worker"],
            names[2]: ["python", "/opt/gatehouse/healthcheck.py", "worker"],
        }
        deadline = time.monotonic() + 180  # a bound on the wait, not a speed assertion
        unhealthy = dict.fromkeys(checks, "not checked yet")
        while unhealthy:
            for name in list(unhealthy):
                done = _podman("exec", name, *checks[name])
                if done.returncode == 0:
                    del unhealthy[name]
                else:
                    unhealthy[name] = _last_line(done)
            if unhealthy:
                logs = {n: _podman("logs", "--tail", "20", n).stdout for n in unhealthy}
                assert time.monotonic() < deadline, json.dumps(
                    {"unhealthy": unhealthy, "logs": logs}, indent=1
                )
                time.sleep(1)
        # and from outside the containers, over TLS, trusting the served certificate
        trust = ssl.create_default_context(cafile=str(secrets / "shim.pem"))
        with httpx.Client(
            base_url=f"https://127.0.0.1:{port}", verify=trust, trust_env=False, timeout=30
        ) as http:
            ready = http.get("/readyz")
            assert ready.status_code == 200, ready.text
            assert ready.json()["checks"]["workers"] == {"ok": True, "live": 2}, ready.text
            # and a run through it: submitted, planned, approved, executed by a worker
            intent = {"recipe": "echo", "objective": "from the image", "parameters": {"n": 1}}
            sam = {"Authorization": f"Bearer {people['sam']}"}
            accepted = http.post("/intent", json=intent, headers=sam)
            assert accepted.status_code in (200, 201, 202), accepted.text
            run_id = str(accepted.json()["run_id"])
            card = _wait_status(http, run_id, people["sam"], {"waiting_approval", "failed"})
            assert card["status"] == "waiting_approval", card
            decided = http.post(
                f"/approve/{run_id}",
                json={"plan_digest": card["plan_digest"]},
                headers={"Authorization": f"Bearer {people['ada']}"},
            )
            assert decided.status_code == 200, decided.text
            finished = _wait_status(http, run_id, people["sam"], {"succeeded", "failed"})
            assert finished["status"] == "succeeded", finished
    finally:
        _podman("rm", "-f", "-t", "5", *names)
        _podman("volume", "rm", "-f", *names[1:])
