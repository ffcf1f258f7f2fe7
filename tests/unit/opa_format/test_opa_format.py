"""opa_format's pure parts: manifest lines, templates, the public names, the CLI around it."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization

import opa_format
from contracts import ErrorCode
from opa_format import (
    Manifest,
    TemplateVariables,
    extract,
    objective_of,
    read_archive,
    render_prompt,
    trust_list,
    write_archive,
)
from opa_format._manifest import MAX_LINE, parse_jar, write_jar
from shim.cli import main
from tests.security.opa._build import NOW, files_zip, make_pki

VARS = TemplateVariables(archive_name="a", extracted_path="/x", timestamp="T", agent="bot")


def test_public_names_are_what_the_package_exports() -> None:
    exported = {n for n in dir(opa_format) if not n.startswith("_")}
    assert set(opa_format.__all__) == exported - {"annotations"}


def test_long_and_non_ascii_values_wrap_at_72_bytes_and_read_back() -> None:
    value = "é" * 100 + "x" * 50
    data, _ = write_jar([{"Manifest-Version": "1.0", "Description": value}])
    assert all(len(line) <= MAX_LINE for line in data.split(b"\r\n"))
    (main_section,) = parse_jar(data, "m", ErrorCode.OPA_MANIFEST_INVALID)
    assert main_section.attributes["Description"] == value


def test_only_reserved_variables_are_substituted() -> None:
    text = "{{agent}} at {{ timestamp }} in {{extracted_path}} of {{archive_name}}: {{other}}"
    assert render_prompt(text, VARS) == "bot at T in /x of a: {{other}}"


def test_written_archive_round_trips_and_extracts_private(tmp_path: Path) -> None:
    out = write_archive(
        prompt="Do {{agent}}'s task.",
        manifest=Manifest(title="t", execution_mode="batch"),
        files={"data/deep/er/f.txt": b"f"},
    )
    archive = read_archive(out, now=NOW)
    assert archive.signature.signed is False
    assert objective_of(archive, VARS) == "### prompt\nDo bot's task."
    root = extract(archive, tmp_path / "root")
    f = root / "data" / "deep" / "er" / "f.txt"
    assert f.read_bytes() == b"f"
    assert stat.S_IMODE(f.stat().st_mode) == 0o600
    assert stat.S_IMODE((root / "data" / "deep").stat().st_mode) == 0o700


def test_cli_trust_add_list_remove_and_inspect_exit_codes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pki = make_pki()
    store = tmp_path / "trust"
    pem = tmp_path / "ca.pem"
    pem.write_bytes(pki.ca.public_bytes(serialization.Encoding.PEM))

    def run(*argv: str) -> int:
        with pytest.raises(SystemExit) as done:
            main(["opa", *argv])
        return int(done.value.code or 0)

    assert run("trust", "add", str(pem), "--name", "ca", "--trust-dir", str(store)) == 0
    assert run("trust", "add", str(pem), "--trust-dir", str(store)) == 2  # already trusted
    assert run("trust", "list", "--trust-dir", str(store)) == 0
    assert "CN=Gatehouse Test CA" in capsys.readouterr().out
    (entry,) = trust_list(store)
    assert entry.is_ca
    bad = tmp_path / "bad.opa"
    bad.write_bytes(files_zip({"prompt.md": b"x"}))
    assert run("inspect", str(bad), "--json", "--trust-dir", str(store)) == 1
    out = capsys.readouterr()
    assert json.loads(out.out)["error"]["code"] == "opa_manifest_invalid"
    assert "opa_manifest_invalid" in out.err
    assert run("inspect", str(tmp_path / "missing.opa"), "--trust-dir", str(store)) == 2
    assert run("trust", "remove", entry.fingerprint_sha256, "--trust-dir", str(store)) == 0
    assert trust_list(store) == []
    assert run("trust", "remove", "ca", "--trust-dir", str(store)) == 2
