"""Evidence bundles and anchored chain heads, on both databases.

A run's exported bundle verifies offline; each way of changing it is named by
the first check it breaks. A chain rewritten consistently in the database, or
cut short, verifies on its own but not against the checkpoints the worker
anchored at the run's end (in the database and in the anchor file).
"""

from __future__ import annotations

import base64
import copy
import json
import os
import re
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from contracts import digest_of
from ledger.bundle import BUNDLE_FORMAT, LEGACY_FORMAT, STATEMENT_PAYLOAD_TYPE, bundle_bytes
from ledger.bundle_verify import verify_bundle
from ledger.signing import generate_key, load_signing_key, load_verify_key, sign_envelope
from shim.cli import main
from tests.conftest import require_backend
from tests.support.guard import network_guard
from tests.support.stack import BACKENDS, Stack, running_stack

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("keys")
    out = {}
    for name in ("deploy", "other"):
        generate_key(folder / f"{name}.pem", folder / f"{name}.pub.pem")
        out[name], out[f"{name}.pub"] = folder / f"{name}.pem", folder / f"{name}.pub.pem"
    return out


@pytest.fixture(scope="module", params=BACKENDS)
def signed_stack(
    request: pytest.FixtureRequest, keys: dict[str, Path], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Stack]:
    """A stack whose worker signs its checkpoints with the deployment's key."""
    require_backend(request.param)
    with running_stack(
        request.param,
        tmp_path_factory.mktemp(f"evidence-{request.param}"),
        worker_env={"GATEHOUSE_SIGNING_KEY": str(keys["deploy"])},
    ) as built:
        yield built


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    with pytest.raises(SystemExit) as done:
        main(list(argv))
    out = capsys.readouterr()
    return int(done.value.code or 0), out.out + out.err


@pytest.fixture(scope="module")
def exported(signed_stack: Stack, keys: dict[str, Path]) -> tuple[str, bytes]:
    """(run id, its bundle's bytes), exported through the CLI."""
    run_id = signed_stack.finished_run(objective="evidence")
    out = keys["deploy"].parent / f"{run_id}-{signed_stack.backend}.bundle"
    with pytest.raises(SystemExit) as done:
        main(
            ["evidence", "export", run_id, "-o", str(out), "--key", str(keys["deploy"]),
             "--database-url", signed_stack.database_url]
        )  # fmt: skip
    assert done.value.code == 0
    return run_id, out.read_bytes()


def _verify(raw: bytes, keys: dict[str, Path], which: str = "deploy.pub") -> str | None:
    return verify_bundle(raw, load_verify_key(keys[which].read_bytes())).problem


def test_an_exported_bundle_verifies_offline(
    exported: tuple[str, bytes], keys: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    run_id, raw = exported
    with network_guard() as attempts:
        report = verify_bundle(raw, load_verify_key(keys["deploy.pub"].read_bytes()))
    assert attempts == []
    assert report.ok, report.problem
    assert report.facts["run_id"] == run_id and report.facts["entries"] == 3
    assert report.facts["checkpoints"] == 1 and report.facts["signed_checkpoints"] == 1
    bundle = json.loads(raw)
    statement = json.loads(base64.b64decode(bundle["envelope"]["payload"]))
    assert statement["_type"] == "https://in-toto.io/Statement/v1"
    assert statement["predicateType"] == "https://gatehouse.dev/attestation/run/v1"
    assert statement["predicate"]["entries"] == 3
    assert statement["predicate"]["decisions"][0]["decision"] == "approved"
    assert bundle["digests"]["content"]["canonicalization"] == "rfc8785"
    assert bundle["content"]["ledger"]["canonicalization"] == "gatehouse-json-v1"
    assert bundle["content"]["replay"]["trace_digest"]
    assert bundle["content"]["policies"]["profile_digest"]
    path = keys["deploy"].parent / "ok.bundle"
    path.write_bytes(raw)
    code, out = _cli(capsys, "evidence", "verify", str(path), "--key", str(keys["deploy.pub"]))
    assert code == 0 and "bundle verifies" in out and "3 entries" in out
    code, out = _cli(capsys, "evidence", "verify", str(path), "--key", str(keys["other.pub"]))
    assert code == 1 and "signature: not made by the given key" in out


def _flip(raw: bytes, start: bytes, nth: int = 1, skip: int = 12) -> bytes:
    """Change one byte: the ``skip``-th alphanumeric byte after the ``nth`` ``start``
    (``nth=-1``: the last; the bundle's own envelope comes after the checkpoints')."""
    at = -1
    for _ in range(nth if nth > 0 else raw.count(start)):
        at = raw.index(start, at + 1)
    i, seen = at + len(start), 0
    while True:
        if chr(raw[i]).isalnum():
            seen += 1
            if seen == skip:
                break
        i += 1
    new = b"B" if raw[i : i + 1] == b"A" else b"A"
    return raw[:i] + new + raw[i + 1 :]


@pytest.mark.parametrize(
    ("where", "change", "reason"),
    [
        (
            "a ledger body",
            lambda raw: _flip(raw, b'"request_json": "', nth=2, skip=2),
            "ledger entry 2 (step s2): the request body does not match its digest",
        ),
        (
            "an entry's status",
            lambda raw: raw.replace(b'"status": "completed"', b'"status": "failed"', 1),
            'ledger entry 1 (step s1): status was changed after it was sealed (sealed "completed",'
            ' now "failed")',
        ),
        (
            "the statement",
            lambda raw: _flip(raw, b'"payload": "', nth=-1, skip=40),
            "signature: does not verify with the given key over the envelope's payload (PAE)",
        ),
        (
            "the signature",
            lambda raw: _flip(raw, b'"sig": "', nth=-1, skip=20),
            "signature: does not verify with the given key over the envelope's payload (PAE)",
        ),
        (
            "a checkpoint's signed body",
            lambda raw: _flip(raw, b'"payload": "', skip=40),
            "statement subject digest does not match the bundle content",
        ),
        (
            "an episode",
            lambda raw: raw.replace(b'"episode_type": "execution/', b'"episode_type": "x/', 1),
            "statement subject digest does not match the bundle content",
        ),
    ],
)
def test_one_changed_byte_is_named(
    exported: tuple[str, bytes],
    keys: dict[str, Path],
    where: str,
    change: Callable[[bytes], bytes],
    reason: str,
) -> None:
    raw = exported[1]
    changed = change(raw)
    assert changed != raw, where
    assert _verify(changed, keys) == reason


def _edited(raw: bytes, edit: Callable[[dict[str, Any]], None]) -> bytes:
    bundle = json.loads(raw)
    edit(bundle)
    return bundle_bytes(bundle)  # spelled as the exporter spells: only the edit differs


def _drop_last(b: dict[str, Any], restate: bool) -> None:
    ledger = b["content"]["ledger"]
    ledger["entries"].pop()
    if restate:  # and say so consistently: count and head of the shorter chain
        ledger["count"], ledger["head"] = 2, ledger["entries"][-1]["entry_hash"]


def _resign(b: dict[str, Any], key_file: Path) -> None:
    statement = json.loads(base64.b64decode(b["envelope"]["payload"]))
    key = load_signing_key(key_file.read_bytes())
    b["envelope"] = sign_envelope(key, STATEMENT_PAYLOAD_TYPE, statement)


def test_removed_entries_and_another_key_are_named(
    exported: tuple[str, bytes], keys: dict[str, Path]
) -> None:
    raw = exported[1]
    middle = _edited(raw, lambda b: b["content"]["ledger"]["entries"].pop(1))
    assert _verify(middle, keys) == "ledger entry 2 (step s3): chain_seq 3 where 2 was expected"
    last = _edited(raw, lambda b: _drop_last(b, restate=False))
    assert _verify(last, keys) == "ledger: 2 entries where the bundle says 3"
    restated = _edited(raw, lambda b: _drop_last(b, restate=True))
    assert _verify(restated, keys) == "statement subject digest does not match the bundle content"
    other = _edited(raw, lambda b: _resign(b, keys["other"]))
    problem = _verify(other, keys)
    assert problem is not None and problem.startswith("signature: not made by the given key")
    # a good signature by the other key; the worker's checkpoint inside is still the deployment's
    by_other = _verify(other, keys, "other.pub")
    assert by_other is not None
    assert by_other.startswith("checkpoint 1: signature not made by the given key")


def _rewrite_consistently(stack: Stack, run_id: str, seq: int) -> None:
    """Edit entry ``seq``'s request, its digest and sealed copy, and recompute every
    hash after it (an entry's hash: sha256 of [prev_hash, 2, its sealed copy])."""
    rows = stack.sql(
        "SELECT op_key, chain_seq, entry_hash, request_json, sealed_json"
        " FROM calls WHERE run_id = :r AND chain_seq IS NOT NULL ORDER BY chain_seq",
        r=run_id,
    )
    prev = rows[seq - 2][2] if seq > 1 else "0" * 64
    for op_key, chain_seq, _, request_json, sealed_json in rows[seq - 1 :]:
        request, sealed = json.loads(request_json), json.loads(sealed_json)
        if chain_seq == seq:
            request["forged"] = True
            sealed["request_digest"] = digest_of(request)
        entry_hash = digest_of([prev, 2, sealed])
        stack.execute(
            "UPDATE calls SET request_json = :rq, request_digest = :rd, prev_hash = :p,"
            " entry_hash = :h, sealed_json = :s WHERE op_key = :k",
            rq=json.dumps(request, sort_keys=True, separators=(",", ":")),
            rd=sealed["request_digest"],
            p=prev,
            h=entry_hash,
            s=json.dumps(sealed),
            k=op_key,
        )
        prev = entry_hash


def _ledger_verify(stack: Stack, run_id: str) -> dict[str, Any]:
    r = stack.client.get(f"/runs/{run_id}/ledger/verify", headers=stack.auth("olga"))
    assert r.status_code == 200, r.text
    out: dict[str, Any] = r.json()
    return out


def test_an_intact_run_is_anchored_in_the_database_and_the_file(signed_stack: Stack) -> None:
    run_id = signed_stack.finished_run(2, "evidence")
    report = _ledger_verify(signed_stack, run_id)
    assert report["ok"] is True and report["entries"] == 2
    assert report["anchored"]["checkpoints"] == 2 and report["anchored"]["signed"] == 2
    assert report["anchored"]["entries"] == 2
    assert signed_stack.anchor_file is not None
    # the same checkpoint in two places, each counted apart (a bundle carries the database's)
    by_source = report["anchored"]["by_source"]
    assert by_source["the database"] == 1 and sum(by_source.values()) == 2, by_source
    lines = [json.loads(x) for x in signed_stack.anchor_file.read_text().splitlines()]
    mine = [x for x in lines if x["checkpoint"]["run_id"] == run_id]
    assert len(mine) == 1 and mine[0]["checkpoint"]["head"] == report["head"]
    assert mine[0]["envelope"]["payloadType"] == "application/vnd.gatehouse.checkpoint+json"


@pytest.mark.parametrize("db_anchor_too", [False, True])
def test_a_consistent_rewrite_is_caught_by_the_anchors(
    signed_stack: Stack, db_anchor_too: bool
) -> None:
    run_id = signed_stack.finished_run(objective="evidence")
    _rewrite_consistently(signed_stack, run_id, seq=2)
    if db_anchor_too:  # whoever rewrote the chain removed the database's checkpoint too
        signed_stack.execute("DELETE FROM chain_checkpoints WHERE run_id = :r", r=run_id)
    report = _ledger_verify(signed_stack, run_id)
    assert report["ok"] is False
    broken = report["first_broken"]
    assert broken["chain_seq"] == 3
    assert "entry 3's hash is not the head anchored at" in broken["reason"]
    assert broken["reason"].endswith("the chain was rewritten")
    where = str(signed_stack.anchor_file) if db_anchor_too else "the database"
    assert where in broken["reason"]


def test_a_truncated_chain_is_caught_by_the_anchors(signed_stack: Stack) -> None:
    run_id = signed_stack.finished_run(objective="evidence")
    signed_stack.execute("DELETE FROM calls WHERE run_id = :r AND chain_seq = 3", r=run_id)
    signed_stack.execute("DELETE FROM chain_checkpoints WHERE run_id = :r", r=run_id)
    report = _ledger_verify(signed_stack, run_id)
    assert report["ok"] is False and report["entries"] == 2
    reason = report["first_broken"]["reason"]
    assert reason.startswith("the chain has 2 entries but the checkpoint of")
    assert str(signed_stack.anchor_file) in reason and reason.endswith("entries were removed")


def _doc_block(title: str) -> str:
    text = (ROOT / "docs" / "security.md").read_text("utf-8")
    section = text[text.index(title) :]
    found = re.search(r"```sh\n(.*?)```", section, flags=re.DOTALL)
    assert found, f"no sh block after {title!r} in docs/security.md"
    return found.group(1)


def _run_script(script: str, folder: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        check=False,
        cwd=folder,
        capture_output=True,
        text=True,
    )


def test_the_documented_openssl_check_accepts_the_signature(
    exported: tuple[str, bytes], keys: dict[str, Path], tmp_path: Path
) -> None:
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not on PATH: the documented check cannot be run here")
    script = _doc_block("Checking the signature with openssl")
    shutil.copy(keys["deploy.pub"], tmp_path / "key.pub.pem")
    (tmp_path / "run.bundle").write_bytes(exported[1])
    done = _run_script(script, tmp_path)
    assert done.returncode == 0, done.stderr
    assert "Signature Verified Successfully" in done.stdout
    # and it refuses a changed statement
    bundle = json.loads(exported[1])
    tampered = copy.deepcopy(bundle)
    payload = bytearray(base64.b64decode(tampered["envelope"]["payload"]))
    payload[10] ^= 1
    tampered["envelope"]["payload"] = base64.b64encode(bytes(payload)).decode()
    (tmp_path / "run.bundle").write_text(json.dumps(tampered))
    bad = _run_script(script, tmp_path)
    assert bad.returncode != 0


# Every byte takes ~2 minutes on a 2-core machine: the gate changes every byte of the
# bundle's first and last 2 KiB and every 5th byte between (about a quarter of them,
# each in both ways); EVIDENCE_EVERY_BYTE=1 (mise run test:evidence-bytes) changes all.
_EDGE = 2048
_STRIDE = 5


def _positions(size: int) -> range | list[int]:
    if os.environ.get("EVIDENCE_EVERY_BYTE") == "1":
        return range(size)
    middle = range(_EDGE, max(_EDGE, size - _EDGE))
    edges = [i for i in range(size) if i < _EDGE or i >= size - _EDGE]
    return sorted({*edges, *middle[::_STRIDE]})


def test_no_byte_of_a_bundle_can_change(
    exported: tuple[str, bytes], keys: dict[str, Path], signed_stack: Stack
) -> None:
    """Every byte of a real bundle (in the gate, a quarter of them: ``_positions``),
    changed (to each of two other values), and whole lines deleted, duplicated and
    swapped: each change fails ``evidence verify``, and
    the answer names what failed. (The digests block and the canonicalization label
    once changed freely: nothing signed or checked them.)"""
    if signed_stack.backend != "sqlite":
        pytest.skip("one bundle is enough: the checks do not depend on the database")
    _, raw = exported
    key = load_verify_key(keys["deploy.pub"].read_bytes())
    assert verify_bundle(raw, key).ok
    missed: list[str] = []
    for i in _positions(len(raw)):
        for new in {raw[i] ^ 0x01, raw[i] ^ 0x20} - {raw[i]}:
            changed = raw[:i] + bytes([new]) + raw[i + 1 :]
            report = verify_bundle(changed, key)
            if report.ok or not report.problem:
                missed.append(f"byte {i} {raw[i : i + 1]!r} -> {bytes([new])!r}")
    lines = raw.split(b"\n")
    for i in range(len(lines) - 1):
        for name, edited in (
            ("deleted", lines[:i] + lines[i + 1 :]),
            ("duplicated", lines[: i + 1] + lines[i:]),
            ("swapped", [*lines[:i], lines[i + 1], lines[i], *lines[i + 2 :]]),
        ):
            joined = b"\n".join(edited)
            if joined != raw and verify_bundle(joined, key).ok:
                missed.append(f"line {i + 1} {name}")
    assert missed == [], f"{len(missed)} changes verified: {missed[:10]}"


def _as_v1(b: dict[str, Any], key_file: Path) -> None:
    """What a release before v2 exported: format v1, no signed bundle_format."""
    statement = json.loads(base64.b64decode(b["envelope"]["payload"]))
    del statement["predicate"]["bundle_format"]
    b["format"] = LEGACY_FORMAT
    b["envelope"] = sign_envelope(
        load_signing_key(key_file.read_bytes()), STATEMENT_PAYLOAD_TYPE, statement
    )


def test_a_bundle_exported_before_v2_still_verifies_and_v2_cannot_pass_for_it(
    exported: tuple[str, bytes], keys: dict[str, Path]
) -> None:
    raw = exported[1]
    old = _edited(raw, lambda b: _as_v1(b, keys["deploy"]))
    assert _verify(old, keys) is None
    relabelled = _edited(raw, lambda b: b.update(format=LEGACY_FORMAT))
    assert _verify(relabelled, keys) == f"bundle: format is not the signed one ({BUNDLE_FORMAT})"
