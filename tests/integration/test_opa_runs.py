"""Runs from OPA archives, end to end, on SQLite and PostgreSQL.

A batch archive (written by the opa-archive library) is submitted; the model
planner (scripted) plans an OpenCode step that writes ``output/result.txt``
and a shell step that reads the archive's data through ``.opa/``. The run
ends with an output archive: the output file (also an artifact of the run),
the data, and the session history with this run appended. Submitted again,
that archive is the next run of the session: its objective carries the
history (chaining). Both runs replay at teardown.
"""

from __future__ import annotations

import hashlib
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import opa
import pytest
from cryptography.hazmat.primitives import serialization

from contracts import Plan, digest_of
from opa_format import Archive, TrustStore, read_archive, trust_add
from shim.cli import main
from tests.security.opa._build import Pki, make_pki
from tests.support.opa import batch_archive, opa_signed, submit_archive
from tests.support.opencode import opencode_stack_for, write_call
from tests.support.stack import BACKENDS, Stack

PLAN: dict[str, Any] = {
    "schema_id": "env.mova_agent_plan_v1",
    "objective": "summarise the report into output/",
    "steps": [
        {
            "step_id": "write",
            "verb": "edit",
            "connector_id": "workspace-opencode",
            "driver_kind": "opencode",
            "input": {"prompt": "OPA-WRITE: write output/result.txt"},
        },
        {
            "step_id": "read",
            "verb": "run",
            "connector_id": "workspace-shell",
            "driver_kind": "restricted_shell",
            "input": {"argv": ["head", "-c", "64", ".opa/data/report.csv"]},
        },
    ],
}


def _turn(i: int) -> dict[str, Any]:
    return {
        "step_id": f"turn{i}",
        "verb": "edit",
        "connector_id": "workspace-opencode",
        "driver_kind": "opencode",
        "input": {"prompt": f"OPA-TURN {i}: look around"},
    }


AUTONOMOUS_PLAN: dict[str, Any] = {
    "schema_id": "env.mova_agent_plan_v1",
    "objective": "keep going",
    "steps": [_turn(i) for i in range(1, 5)],
}
SCRIPT: dict[str, Any] = {
    "turns": [
        {
            "match": "OPA-WRITE",
            "replies": [write_call("output/result.txt", "total: 3\n"), {"content": "written"}],
        },
        {"match": "OPA-TURN", "replies": [{"content": "looked"}]},
        {"match": "OPA-E2E", "replies": [{"content": PLAN}]},
        {"match": "OPA-AUTO", "replies": [{"content": AUTONOMOUS_PLAN}]},
    ]
}
REPORT = b"a,b\n1,2\n"


@pytest.fixture(scope="module")
def pki() -> Pki:
    return make_pki()


@pytest.fixture(scope="module")
def trust(pki: Pki, tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("opa-trust")
    trust_add(folder, pki.ca.public_bytes(serialization.Encoding.PEM), "test-ca")
    return folder


def _read(data: bytes, trust: Path, name: str) -> Archive:
    """An output archive, verified: the worker signed it with the CA's signer."""
    archive = read_archive(data, name=name, trust=TrustStore.load(trust))
    assert archive.signature.signer is not None
    assert archive.signature.signer.subject == "CN=archive signer"
    return archive


@pytest.fixture(scope="module", params=BACKENDS)
def oc_stack(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    pki: Pki,
    trust: Path,
) -> Iterator[Stack]:
    # The worker signs its output archives with a key the same CA issued.
    keys = tmp_path_factory.mktemp("opa-key")
    (keys / "key.pem").write_bytes(
        pki.signer.private_key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    (keys / "cert.pem").write_bytes(pki.signer.certificate.public_bytes(serialization.Encoding.PEM))
    env = {
        "GATEHOUSE_OPA_TRUST_DIR": str(trust),
        "GATEHOUSE_OPA_SIGNING_KEY": str(keys / "key.pem"),
        "GATEHOUSE_OPA_SIGNING_CERT": str(keys / "cert.pem"),
    }
    yield from opencode_stack_for(request, tmp_path_factory, SCRIPT, planner=True, env=env)


def _approved(
    stack: Stack, run_id: str, plan: dict[str, Any] = PLAN, status: str = "succeeded"
) -> dict[str, Any]:
    card = stack.wait(run_id, {"waiting_approval", "failed"})
    assert card["status"] == "waiting_approval", card
    digest = digest_of(Plan.model_validate(plan).model_dump(mode="json"))
    assert card["plan_digest"] == digest
    r = stack.client.post(f"/approve/{run_id}", json={"plan_digest": digest})
    assert r.status_code == 200, r.text
    done = stack.wait(run_id, {"succeeded", "failed", "cancelled"}, timeout=120)
    assert done["status"] == status, done
    return done


def _run(stack: Stack, archive: bytes, name: str) -> dict[str, Any]:
    run_id = submit_archive(stack, archive, name, recipe="model-plan", profile="opencode")
    return _approved(stack, run_id)


def _output(stack: Stack, run_id: str) -> bytes:
    rows = stack.sql(
        "SELECT a.content FROM opa_runs o JOIN artifacts a ON a.sha256 = o.output_sha256"
        " WHERE o.run_id = :r",
        r=run_id,
    )
    assert len(rows) == 1, "the run has no output archive"
    return bytes(rows[0][0])


def test_a_batch_archive_runs_packs_its_output_and_chains(
    oc_stack: Stack, tmp_path: Path, trust: Path
) -> None:
    stack = oc_stack
    first = batch_archive("OPA-E2E: summarise data/report.csv", {"data/report.csv": REPORT})
    done = _run(stack, first, "report.opa")
    run_id = done["run_id"]
    assert done["opa"]["archive_name"] == "report"
    assert done["opa"]["execution_mode"] == "batch"
    assert done["objective"].startswith("### prompt\nOPA-E2E")
    write, read = done["steps"]
    assert write["status"] == "succeeded", write
    # the archive's data, read-only in the run's workspace
    assert read["output"]["stdout"] == REPORT.decode()

    packed = _output(stack, run_id)
    # packed before the run turned terminal: the run view names it
    assert done["opa"]["output_sha256"] == hashlib.sha256(packed).hexdigest()
    out = _read(packed, trust, "report-out")
    names = {e.name for e in out.entries}
    assert {"output/result.txt", "data/report.csv", "prompt.md"} <= names
    assert out.manifest.execution_mode == "batch"
    assert out.history is not None
    user, assistant = out.history.messages[-2:]
    assert (user.role, assistant.role) == ("user", "assistant")
    assert f"Gatehouse run {run_id} ended succeeded" in str(assistant.content)
    artifacts = stack.client.get(f"/runs/{run_id}/artifacts").json()["artifacts"]
    by_name = {(a["step_id"], a["name"]): a for a in artifacts}
    result = by_name[("@opa", "output/result.txt")]
    assert result["sha256"] == hashlib.sha256(b"total: 3\n").hexdigest()
    assert ("@opa", "input.opa") in by_name and ("@opa", "output.opa") in by_name

    # served as it was stored, a plain ZIP that `gatehouse opa inspect` passes
    served = stack.client.get(f"/runs/{run_id}/output.opa")
    assert served.status_code == 200 and served.content == packed
    path = tmp_path / "report-out.opa"
    path.write_bytes(served.content)
    with zipfile.ZipFile(path) as z:
        assert z.testzip() is None
    with pytest.raises(SystemExit) as inspected:
        main(["opa", "inspect", str(path), "--trust-dir", str(trust)])
    assert inspected.value.code == 0

    # chaining: the output archive is the next run of the session
    second = _run(stack, packed, "report-out.opa")
    assert "### assistant\nGatehouse run " + run_id in second["objective"]
    chained = _read(_output(stack, second["run_id"]), trust, "again")
    assert chained.history is not None and len(chained.history.messages) == 4


# How a turn ends when OpenCode went quiet past the profile's limits.
STALLED = ("oc_stalled", "oc_timeout")


def test_an_autonomous_archive_stops_at_its_turn_budget(
    oc_stack: Stack, pki: Pki, trust: Path
) -> None:
    stack = oc_stack

    # written and signed by the opa-archive library (interop), trusted through the test CA
    def build(manifest: opa.Manifest | None) -> opa.OpaArchive:
        archive = opa.OpaArchive(
            manifest=manifest or opa.Manifest(execution_mode=opa.ExecutionMode.AUTONOMOUS),
            prompt=opa.Prompt("OPA-AUTO: keep looking until told to stop"),
        )
        archive.add_data_bytes("data/notes.txt", b"three notes\n")
        return archive

    signed = opa_signed(
        build,
        pki.signer.private_key,
        pki.signer.certificate,
        title="autonomous",
        execution_mode=opa.ExecutionMode.AUTONOMOUS,
    )
    # opencode-quick holds autonomous archives to three model turns. Its stall
    # detector is short (4 s of silence): on a loaded machine a turn can stall and be
    # tried again, or the run end on the stall before the budget is reached. Such a
    # run proves nothing about the budget, so it is tried once more (the second run
    # must reach the budget).
    for attempt in (1, 2):
        run_id = submit_archive(
            stack, signed, "auto.opa", recipe="model-plan", profile="opencode-quick"
        )
        done = _approved(stack, run_id, AUTONOMOUS_PLAN, status="failed")
        if done["error_code"] not in STALLED or attempt == 2:
            break
    assert done["opa"]["signer"]["subject"] == "CN=archive signer"
    assert done["budgets"]["limits"]["max_model_turns"] == 3
    assert (done["error_code"], done["budgets"]["exceeded"]) == (
        "budget_exceeded",
        "max_model_turns",
    )
    # The compile and two turns spend the three model turns, and the third turn is
    # refused before it is sent (a turn3 step, budget_exceeded). A turn for which
    # OpenCode asked the model once more, or tried again after a stall, spends one
    # of them too: the run then ends at turn2, refused before it is sent, or during
    # it. Whichever way, two turns were sent and none past the budget.
    steps = [s["step_id"] for s in done["steps"]]
    assert steps in (["turn1", "turn2", "turn3"], ["turn1", "turn2"]), steps
    if len(steps) == 3:
        assert done["steps"][2]["error_code"] == "budget_exceeded"
    calls = stack.sql("SELECT step_id FROM calls WHERE run_id = :r AND kind = 'tool'", r=run_id)
    sent = sorted(c[0] for c in calls)
    assert sent in (["turn1", "turn2"], ["turn1", "turn1"]), sent
    # the output archive says how the run ended
    out = _read(_output(stack, run_id), trust, "auto-out")
    assert out.history is not None
    assert "ended failed (budget_exceeded)" in str(out.history.messages[-1].content)
