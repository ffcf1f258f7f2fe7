"""Interop: archives from opa-archive read and verify; archives Gatehouse writes open anywhere.

opa-archive 0.1.0 (module ``opa``) writes the manifest with a main section only
and signs just the manifest (its ``.SF`` has ``SHA-256-Digest-Manifest`` and
name-less section digests; the PKCS#7 block is attached, with signed
attributes). Gatehouse requires every file to be covered by a manifest digest,
so a signed archive of opa-archive's default shape is refused
(``opa_unsigned_file``); with the JAR per-entry sections added to its manifest
(``tests.support.opa.DigestManifest``) the library's own signer produces archives that
verify.
"""

from __future__ import annotations

import io
import shutil
import subprocess
import zipfile
from pathlib import Path

import opa
import pytest
from cryptography.hazmat.primitives import serialization

from contracts import ErrorCode, GatehouseError
from opa_format import (
    Manifest,
    TemplateVariables,
    TrustStore,
    extract,
    objective_of,
    read_archive,
    trust_add,
    write_archive,
)
from shim.cli import main
from tests.security.opa._build import NOW, Pki
from tests.support.opa import DigestManifest


def _opa_archive(manifest: opa.Manifest | None = None) -> opa.OpaArchive:
    archive = opa.OpaArchive(
        manifest=manifest or opa.Manifest(title="Interop", execution_mode=opa.ExecutionMode.BATCH),
        prompt=opa.Prompt("Read {{extracted_path}}/data/report.csv for {{agent}}."),
    )
    session = opa.SessionHistory(session_id="s-1", created_at="2026-01-01T00:00:00Z")
    session.add_system("You are careful.")
    session.add_user([opa.ContentBlock.text("earlier question")])
    session.add_assistant("earlier answer")
    archive.set_session(session)
    archive.add_data_bytes("data/report.csv", b"a,b\n1,2\n")
    archive.add_extension_file("acme/config.json", b'{"unknown": true}')
    return archive


def _signer(pki: Pki) -> opa.Signer:
    return opa.Signer(private_key=pki.signer.private_key, certificate=pki.signer.certificate)


def test_unsigned_opa_archive_reads(tmp_path: Path) -> None:
    data: bytes = _opa_archive().to_bytes()
    archive = read_archive(data, name="interop", now=NOW)
    assert archive.signature.signed is False
    assert archive.manifest.execution_mode == "batch"
    assert archive.manifest.title == "Interop"
    assert archive.history is not None and len(archive.history.messages) == 3
    names = {e.name for e in archive.entries}
    assert {"META-INF/MANIFEST.MF", "prompt.md", "session/history.json"} <= names
    assert "META-INF/extensions/acme/config.json" in names
    root = extract(archive, tmp_path / "x")
    assert (root / "data" / "report.csv").read_bytes() == b"a,b\n1,2\n"
    assert (root.stat().st_mode & 0o777) == 0o700
    text = objective_of(
        archive,
        TemplateVariables(
            archive_name="interop", extracted_path=str(root), timestamp="T", agent="claude"
        ),
    )
    assert text.index("You are careful.") < text.index("earlier answer") < text.index("claude")
    assert f"Read {root}/data/report.csv for claude." in text


def test_signed_opa_archive_with_entry_digests_verifies(pki: Pki) -> None:
    plain = zipfile.ZipFile(io.BytesIO(_opa_archive().to_bytes()))
    files = {n: plain.read(n) for n in plain.namelist() if n != "META-INF/MANIFEST.MF"}
    manifest = DigestManifest(files, title="Interop", execution_mode=opa.ExecutionMode.BATCH)
    signed: bytes = _signer(pki).sign_bytes(_opa_archive(manifest).to_bytes())
    archive = read_archive(signed, trust=TrustStore([pki.ca]), now=NOW)
    assert archive.signature.signed is True
    assert archive.signature.block == "META-INF/SIGNATURE.RSA"
    assert archive.signature.signer is not None
    assert archive.signature.signer.subject == "CN=archive signer"
    with pytest.raises(GatehouseError) as untrusted:
        read_archive(signed, trust=TrustStore(), now=NOW)
    assert untrusted.value.code is ErrorCode.OPA_SIGNER_UNTRUSTED


def test_signed_opa_archive_of_the_default_shape_is_refused(pki: Pki) -> None:
    signed: bytes = _signer(pki).sign_bytes(_opa_archive().to_bytes())
    with pytest.raises(GatehouseError) as refused:
        read_archive(signed, trust=TrustStore([pki.ca]), now=NOW)
    assert refused.value.code is ErrorCode.OPA_UNSIGNED_FILE


def test_rewrite_keeps_unknown_extensions_and_signs(pki: Pki) -> None:
    source = read_archive(_opa_archive().to_bytes(), now=NOW)
    out = write_archive(
        prompt=source.prompt,
        manifest=source.manifest,
        history=source.history,
        files={"output/result.txt": b"done\n"},
        keep_extensions_from=source,
        signing_key=pki.ec_signer,
    )
    again = read_archive(out, trust=TrustStore([pki.ca]), now=NOW)
    assert again.signature.block == "META-INF/SIGNATURE.EC"
    with zipfile.ZipFile(io.BytesIO(out)) as z:
        assert z.read("META-INF/extensions/acme/config.json") == b'{"unknown": true}'
    assert again.manifest.attributes["Title"] == "Interop"


def test_gatehouse_archives_open_with_standard_tools_and_pass_inspect(
    pki: Pki, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = write_archive(
        prompt="Hello {{agent}}.\n",
        manifest=Manifest(title="written by Gatehouse", execution_mode="autonomous"),
        files={"data/a.txt": b"a" * 1000},
        signing_key=pki.signer,
    )
    path = tmp_path / "written.opa"
    path.write_bytes(out)
    with zipfile.ZipFile(path) as z:
        assert z.testzip() is None
    if shutil.which("unzip"):
        done = subprocess.run(["unzip", "-t", str(path)], capture_output=True, check=False)
        assert done.returncode == 0, done.stdout
    trust_dir = tmp_path / "trust"
    ca_pem = tmp_path / "ca.pem"
    ca_pem.write_bytes(pki.ca.public_bytes(serialization.Encoding.PEM))
    trust_add(trust_dir, ca_pem.read_bytes(), "test-ca")
    with pytest.raises(SystemExit) as done_inspect:
        main(["opa", "inspect", str(path), "--trust-dir", str(trust_dir)])
    assert done_inspect.value.code == 0
    printed = capsys.readouterr().out
    assert "signer      CN=archive signer" in printed
    assert "data/a.txt" in printed
