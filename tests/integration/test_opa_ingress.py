"""OPA archives through the shim: POST /intent with an archive body, and GET /runs/{id}/output.opa.

Archives are built with the ``opa-archive`` library (unsigned), with
``opa_format.write_archive`` (signed under the test CA, which the shim's trust
store holds) and with ``zipfile`` (hostile). Every run here uses the ``echo``
template recipe, so it compiles and waits for approval; only the submit-time
behaviour is under test. The CLI test talks to a real uvicorn shim on loopback.
"""

from __future__ import annotations

import hashlib
import io
import json
import random
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import opa
import pytest
from cryptography.hazmat.primitives import serialization

from ledger import opa_runs, open_database
from opa_format import Manifest, fingerprint, trust_add, write_archive
from shim.cli import main
from tests.conftest import require_backend
from tests.security.opa._build import Pki, make_pki
from tests.support.opa import OPA_MEDIA
from tests.support.served import ServedShim
from tests.support.stack import BACKENDS, Stack, running_stack

PROMPT = "Summarise {{archive_name}}/data/notes.txt for {{agent}}."
LIMIT = 64 * 1024  # GATEHOUSE_MAX_ARCHIVE_BYTES in these tests
TABLES = ("intents", "runs", "opa_runs", "artifacts", "run_artifacts")


@pytest.fixture(scope="module")
def pki() -> Pki:
    return make_pki()


@pytest.fixture(scope="module")
def trust_dir(pki: Pki, tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("opa-trust")
    trust_add(folder, pki.ca.public_bytes(serialization.Encoding.PEM), "test-ca")
    return folder


@pytest.fixture(scope="module", params=BACKENDS)
def stack(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, trust_dir: Path
) -> Iterator[Stack]:
    require_backend(request.param)
    env = {"GATEHOUSE_OPA_TRUST_DIR": str(trust_dir), "GATEHOUSE_MAX_ARCHIVE_BYTES": str(LIMIT)}
    # Every accepted run here waits for approval and holds a queue slot while it
    # waits; the default four would leave later runs queued.
    worker_env = {"GATEHOUSE_WORKER_CONCURRENCY": "32"}
    folder = tmp_path_factory.mktemp(f"opa-{request.param}")
    with running_stack(request.param, folder, worker_env=worker_env, shim_env=env) as s:
        yield s


def unsigned(
    mode: opa.ExecutionMode = opa.ExecutionMode.BATCH,
    hint: str | None = None,
    prompt: str = PROMPT,
    data: bytes = b"three notes\n",
) -> bytes:
    archive = opa.OpaArchive(
        manifest=opa.Manifest(title="ingress", execution_mode=mode, agent_hint=hint),
        prompt=opa.Prompt(prompt),
    )
    archive.add_data_bytes("data/notes.txt", data)
    out: bytes = archive.to_bytes()
    return out


def post(stack: Stack, content: Any, key: str | None = None, **query: str) -> Any:
    headers = {"Content-Type": OPA_MEDIA}
    if key:
        headers["Idempotency-Key"] = key
    params = {"name": "report.opa", "recipe": "echo"} | query
    return stack.client.post("/intent", content=content, params=params, headers=headers)


def counts(stack: Stack) -> dict[str, int]:
    return {t: int(stack.sql(f"SELECT COUNT(*) FROM {t}")[0][0]) for t in TABLES}


def events(stack: Stack, code: str) -> list[tuple[Any, ...]]:
    """(code, episode) per refusal recorded: a row counting repeats gives that many."""
    rows = stack.sql(
        "SELECT error_code, body_json, repeat_count FROM security_events WHERE error_code = :c"
        " ORDER BY last_seen_at",
        c=code,
    )
    return [(c, body) for c, body, repeats in rows for _ in range(int(repeats))]


def refused(stack: Stack, response: Any, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    error: dict[str, Any] = response.json()["error"]
    assert error["code"] == code
    return error


def test_unsigned_batch_archive_is_accepted(stack: Stack) -> None:
    body = unsigned()
    r = post(stack, body)
    assert r.status_code == 202, r.text
    run_id = r.json()["run_id"]
    view = stack.run(run_id)
    assert view["opa"] == {
        "source": "opa_archive",
        "archive_name": "report",
        "archive_sha256": hashlib.sha256(body).hexdigest(),
        "opa_version": "0.1",
        "execution_mode": "batch",
        "signer": None,
        "output_sha256": None,
    }
    assert view["recipe"] == "echo"
    assert view["mode"] == "full-cycle"
    assert "Summarise report/data/notes.txt for echo." in view["objective"]
    assert "{{" not in view["objective"]
    listed = stack.client.get(f"/runs/{run_id}/artifacts").json()["artifacts"]
    inputs = [a for a in listed if a["name"] == "input.opa"]
    assert [a["sha256"] for a in inputs] == [hashlib.sha256(body).hexdigest()]
    assert stack.client.get(f"/artifacts/{inputs[0]['sha256']}").content == body
    # The run goes on like any other: the echo plan waits for a person.
    stack.wait(run_id, {"waiting_approval"})


def test_hostile_archive_is_refused_with_an_event_and_nothing_written(stack: Stack) -> None:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as z:
        z.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\r\nOPA-Version: 0.1\r\n")
        z.writestr("prompt.md", "hello")
        z.writestr("../escape.txt", "out of the root")
    before, seen = counts(stack), len(events(stack, "opa_path_unsafe"))
    error = refused(stack, post(stack, buffer.getvalue(), mode="batch"), 422, "opa_path_unsafe")
    assert "escape.txt" in error["message"]
    assert counts(stack) == before
    recorded = events(stack, "opa_path_unsafe")
    assert len(recorded) == seen + 1
    assert '"route":"POST /intent"' in recorded[-1][1]
    api = stack.client.get("/security-events").json()["security_events"]
    assert any("opa_path_unsafe" in str(e) for e in api)


def test_unsigned_autonomous_is_refused(stack: Stack) -> None:
    before = counts(stack)
    r = post(stack, unsigned(opa.ExecutionMode.AUTONOMOUS))
    refused(stack, r, 403, "opa_unsigned_refused")
    # The query's mode counts as much as the manifest's.
    refused(stack, post(stack, unsigned(), mode="autonomous"), 403, "opa_unsigned_refused")
    assert counts(stack) == before


def test_signed_autonomous_archive_runs_with_narrowed_budgets(stack: Stack, pki: Pki) -> None:
    body = write_archive(
        prompt="Tidy the notes in {{extracted_path}}/data.",
        manifest=Manifest(title="signed", execution_mode="autonomous"),
        files={"data/notes.txt": b"three notes\n"},
        signing_key=pki.signer,
    )
    r = post(stack, body)
    assert r.status_code == 202, r.text
    view = stack.wait(r.json()["run_id"], {"waiting_approval"})
    signer = view["opa"]["signer"]
    assert signer["subject"] == "CN=archive signer"
    assert signer["issuer"] == "CN=Gatehouse Test CA"
    assert signer["trusted_by"] == fingerprint(pki.ca)
    assert view["opa"]["execution_mode"] == "autonomous"
    # approvers see where the objective came from on the card; the evidence keeps it
    assert view["plan_card"]["source"]["signer"] == signer
    episodes = stack.client.get(f"/runs/{view['run_id']}/episodes").json()["episodes"]
    [archive] = [e for e in episodes if e["episode_type"] == "execution/opa_archive"]
    assert archive["body"]["result_details"]["signer"]["subject"] == "CN=archive signer"
    assert "$OPA_EXTRACTED_ROOT/data" in view["objective"]
    limits = view["budgets"]["limits"]
    # The default profile allows 100 turns and 2,000,000 tokens; autonomous runs get less.
    assert (limits["max_model_turns"], limits["max_tokens"]) == (50, 200_000)
    assert limits["max_steps"] == 200


def test_interactive_mode_is_taken_from_the_manifest_or_the_query(stack: Stack) -> None:
    for r in (
        post(stack, unsigned(opa.ExecutionMode.INTERACTIVE)),
        post(stack, unsigned(), mode="interactive"),
    ):
        assert r.status_code == 202, r.text
        view = stack.wait(r.json()["run_id"], {"waiting_approval"})
        assert view["opa"]["execution_mode"] == "interactive"


def test_a_body_over_the_limit_is_refused_while_read(stack: Stack) -> None:
    big = unsigned(data=random.Random(7).randbytes(LIMIT))  # random bytes do not compress
    assert len(big) > LIMIT
    before = counts(stack)
    refused(stack, post(stack, big), 413, "payload_too_large")
    # Sent in chunks with no Content-Length: the count while reading refuses it.
    chunks = iter([big[i : i + 8192] for i in range(0, len(big), 8192)])
    refused(stack, post(stack, chunks), 413, "payload_too_large")
    assert counts(stack) == before


def test_agent_hint_picks_an_allowed_recipe_and_the_profile_bounds_the_choice(
    stack: Stack,
) -> None:
    # The hint names a recipe the profile allows for archives: it wins over the query's.
    r = post(stack, unsigned(hint="echo"), recipe="model-plan")
    assert r.status_code == 202, r.text
    assert stack.run(r.json()["run_id"])["recipe"] == "echo"
    # A hint the profile does not allow is no choice: the query's recipe stands.
    r = post(stack, unsigned(hint="demo-inventory"))
    assert r.status_code == 202, r.text
    assert stack.run(r.json()["run_id"])["recipe"] == "echo"
    before = counts(stack)
    error = refused(
        stack, post(stack, unsigned(), recipe="demo-inventory"), 403, "opa_recipe_not_allowed"
    )
    assert error["details"]["allowed"] == ["model-plan", "echo"]
    # A profile without an opa section runs no archives.
    r = post(stack, unsigned(), policy_profile="auto-read-only")
    refused(stack, r, 403, "opa_recipe_not_allowed")
    assert counts(stack) == before


def test_context_longer_than_an_objective_is_refused(stack: Stack) -> None:
    before = counts(stack)
    error = refused(stack, post(stack, unsigned(prompt="x" * 2100)), 422, "opa_context_too_long")
    assert error["details"]["limit"] == 2000
    assert counts(stack) == before


def test_idempotency_key_returns_the_same_run_for_the_same_archive(stack: Stack) -> None:
    body = unsigned(prompt=PROMPT + " Submitted {{timestamp}}.")
    first = post(stack, body, key="opa-key-1")
    assert first.status_code == 202, first.text
    time.sleep(0.01)  # a later {{timestamp}}: the repeat must still be the same intent
    again = post(stack, body, key="opa-key-1")
    assert again.status_code == 200, again.text
    assert again.json()["run_id"] == first.json()["run_id"]
    # Another archive with the very same objective is another intent all the same.
    other = post(stack, unsigned(prompt=PROMPT), key="opa-key-2")
    assert other.status_code == 202, other.text
    changed = post(stack, unsigned(prompt=PROMPT, data=b"other notes\n"), key="opa-key-2")
    refused(stack, changed, 409, "idempotency_conflict")
    renamed = post(stack, unsigned(prompt=PROMPT), key="opa-key-2", name="other.opa")
    refused(stack, renamed, 409, "idempotency_conflict")
    json_key = stack.submit({"recipe": "echo", "objective": "json"}, key="opa-key-3")
    assert json_key.status_code == 202, json_key.text
    refused(stack, post(stack, unsigned(), key="opa-key-3"), 409, "idempotency_conflict")


def test_archive_query_parameters_are_not_for_json_intents(stack: Stack) -> None:
    r = stack.client.post(
        "/intent", params={"recipe": "echo"}, json={"recipe": "echo", "objective": "x"}
    )
    refused(stack, r, 422, "invalid_request")
    r = post(stack, unsigned(), name="report.zip")
    refused(stack, r, 422, "invalid_request")


def put_output(stack: Stack, run_id: str, content: bytes) -> None:
    """What the worker does when an OPA run ends (built elsewhere): write the output row."""
    db = open_database(stack.database_url)
    try:
        with db.engine.begin() as conn:
            opa_runs.put_output(conn, run_id, content)
    finally:
        db.dispose()


def test_output_archive_route(stack: Stack) -> None:
    r = post(stack, unsigned())
    run_id = r.json()["run_id"]
    error = refused(
        stack, stack.client.get(f"/runs/{run_id}/output.opa"), 409, "opa_output_unavailable"
    )
    assert error["details"]["reason"] == "not_packed_yet"
    plain = stack.submit({"recipe": "echo", "objective": "not an archive"}).json()["run_id"]
    error = refused(
        stack, stack.client.get(f"/runs/{plain}/output.opa"), 409, "opa_output_unavailable"
    )
    assert error["details"]["reason"] == "not_an_opa_run"
    missing = "run_" + "0" * 32
    refused(stack, stack.client.get(f"/runs/{missing}/output.opa"), 404, "run_not_found")

    output = unsigned(prompt="the output")
    put_output(stack, run_id, output)
    got = stack.client.get(f"/runs/{run_id}/output.opa")
    assert got.status_code == 200, got.text
    assert got.content == output
    assert got.headers["content-type"] == OPA_MEDIA
    assert got.headers["content-disposition"] == f'attachment; filename="{run_id}.output.opa"'
    assert stack.run(run_id)["opa"]["output_sha256"] == hashlib.sha256(output).hexdigest()
    # A submitter reads only its own runs' outputs; an approver reads any.
    other = stack.client.get(f"/runs/{run_id}/output.opa", headers=stack.auth("sam"))
    refused(stack, other, 403, "forbidden")
    assert (
        stack.client.get(f"/runs/{run_id}/output.opa", headers=stack.auth("ann")).content == output
    )


def _shim(stack: Stack, trust_dir: Path) -> ServedShim:
    """The shim served on loopback, for the CLI."""
    return ServedShim(
        stack.database_url,
        stack.client.people.file,
        {"GATEHOUSE_OPA_TRUST_DIR": str(trust_dir)},
    )


def cli(argv: list[str]) -> int:
    with pytest.raises(SystemExit) as done:
        main(argv)
    return int(done.value.code or 0)


def test_cli_opa_run_and_output(
    stack: Stack, trust_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    token = stack.client.people.tokens["alice"]
    file = tmp_path / "notes.opa"
    file.write_bytes(unsigned())
    with _shim(stack, trust_dir) as url:
        api = ["--url", url, "--token", token]
        assert cli(["opa", "run", str(file), "--recipe", "echo", *api]) == 0
        accepted = json.loads(capsys.readouterr().out)
        run_id = accepted["run_id"]
        assert accepted["links"]["self"] == f"/runs/{run_id}"
        view = stack.run(run_id)
        assert view["opa"]["archive_name"] == "notes"
        assert "Summarise notes/data/notes.txt for echo." in view["objective"]

        assert cli(["opa", "output", run_id, *api]) == 1
        assert "opa_output_unavailable" in capsys.readouterr().err
        output = unsigned(prompt="the output")
        put_output(stack, run_id, output)
        target = tmp_path / "out.opa"
        assert cli(["opa", "output", run_id, "-o", str(target), *api]) == 0
        assert target.read_bytes() == output

        assert cli(["opa", "run", str(file), "--recipe", "demo-inventory", *api]) == 1
        refused = capsys.readouterr().err
        assert "opa_recipe_not_allowed" in refused
        allowed = [ln for ln in refused.splitlines() if ln.startswith("  allowed: ")]
        assert allowed and "echo" in allowed[0]  # the refusal's details, one line each

        # opa reply: a batch run takes no message; an interactive one queues its turns
        assert cli(["opa", "reply", run_id, "more please", *api]) == 1
        assert "run_not_awaiting_input" in capsys.readouterr().err
        chat = tmp_path / "chat.opa"
        chat.write_bytes(unsigned(opa.ExecutionMode.INTERACTIVE))
        assert cli(["opa", "run", str(chat), "--recipe", "echo", *api]) == 0
        chat_id = json.loads(capsys.readouterr().out)["run_id"]
        assert cli(["opa", "reply", chat_id, "more please", *api]) == 0
        assert json.loads(capsys.readouterr().out)["turn"] == 1
        assert cli(["opa", "reply", chat_id, "--end", *api]) == 0
        assert json.loads(capsys.readouterr().out)["end"] is True
        assert cli(["opa", "reply", chat_id, "text", "--end", *api]) == 2
    not_opa = tmp_path / "notes.zip"
    not_opa.write_bytes(b"")
    assert cli(["opa", "run", str(not_opa), "--url", "http://127.0.0.1:9"]) == 2
