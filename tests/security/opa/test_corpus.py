"""The hostile-archive corpus: every archive refused with its code and its security episode.

Every archive here is built by the test itself (``_corpus``, from ``_build`` and
``_signing``). For each one: ``read_archive`` refuses it with the expected
``opa_*`` code and a 4xx status; ``policies.episodes.security_episode`` built
from the refusal validates against MOVA's security-event schema; the would-be
extraction folder stays empty. A last test scans the file system for anything
the corpus could have written outside a temporary folder.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from contracts import ErrorCode, GatehouseError, SecurityEpisode, validate_instance
from opa_format import (
    ArchiveLimits,
    TrustStore,
    check_unsigned_allowed,
    extract,
    read_archive,
)
from policies.episodes import security_episode
from tests.security.opa._build import MANIFEST_OK, NOW, Pki, RawEntry
from tests.security.opa._corpus import CASES, MARK, Case, with_entries, with_files, with_manifest
from tests.security.opa._signing import signed_archive
from tests.support.mova import vendor_errors


def _refuse(case: Case, pki: Pki, parent: Path) -> GatehouseError:
    data = case.build(pki)
    with pytest.raises(GatehouseError) as refused:
        archive = read_archive(
            data, limits=case.limits, trust=TrustStore([pki.ca]), now=NOW, name=case.id
        )
        extract(archive, parent / "root", case.limits)  # reached only if validation failed to
    return refused.value


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_hostile_archive_is_refused_with_its_code_and_episode(
    case: Case, pki: Pki, tmp_path: Path
) -> None:
    err = _refuse(case, pki, tmp_path)
    assert err.code is case.code, (err.code, err.message)
    assert 400 <= err.code.http_status < 500
    assert err.message
    episode = security_episode(
        run_id=None,
        subject=f"opa:{case.id}",
        code=err.code,
        message=err.message,
        executor_id="shim",
        recorded_at="2026-06-01T00:00:00.000Z",
        details={"archive": case.id, **err.details},
    )
    body = episode.model_dump(mode="json")
    assert vendor_errors(body) == []
    validate_instance("ds.gatehouse_security_episode_v1", body, ErrorCode.INTERNAL_ERROR)
    assert SecurityEpisode.model_validate(body) == episode
    assert body["security_event_type"] == f"gatehouse:{case.code.value}"
    assert list(tmp_path.iterdir()) == []  # nothing extracted, nothing left


def test_the_corpus_is_large_and_covers_every_archive_code() -> None:
    assert len(CASES) >= 30
    assert len({c.id for c in CASES}) == len(CASES)
    covered = {c.code for c in CASES} | {ErrorCode.OPA_UNSIGNED_REFUSED}  # tested below
    # What is asked of a valid archive, not a defect of one: refused at ingress or by the
    # output route, tested in tests/integration/test_opa_ingress.py.
    asked = {
        ErrorCode.OPA_CONTEXT_TOO_LONG,
        ErrorCode.OPA_RECIPE_NOT_ALLOWED,
        ErrorCode.OPA_OUTPUT_UNAVAILABLE,
    }
    opa_codes = {c for c in ErrorCode if c.value.startswith("opa_")}
    assert opa_codes - asked <= covered


def test_unsigned_archive_is_refused_in_autonomous_mode(pki: Pki) -> None:
    archive = read_archive(with_manifest(MANIFEST_OK + b"Execution-Mode: autonomous\r\n"), now=NOW)
    with pytest.raises(GatehouseError) as refused:
        check_unsigned_allowed(archive, allow_unsigned_autonomous=False)
    assert refused.value.code is ErrorCode.OPA_UNSIGNED_REFUSED
    check_unsigned_allowed(archive, allow_unsigned_autonomous=True)
    check_unsigned_allowed(archive, "batch", allow_unsigned_autonomous=False)
    signed = read_archive(signed_archive(pki.signer), trust=TrustStore([pki.ca]), now=NOW)
    check_unsigned_allowed(signed, "autonomous", allow_unsigned_autonomous=False)


def test_extraction_that_fails_midway_leaves_nothing(pki: Pki, tmp_path: Path) -> None:
    data = with_entries(
        RawEntry(b"data/a.bin", os.urandom(3000)), RawEntry(b"data/b.bin", os.urandom(3000))
    )
    archive = read_archive(data, now=NOW)
    with pytest.raises(GatehouseError) as refused:
        extract(archive, tmp_path / "root", ArchiveLimits(max_total_bytes=4000))
    assert refused.value.code is ErrorCode.OPA_LIMIT_EXCEEDED
    assert list(tmp_path.iterdir()) == []


def test_extraction_refuses_an_existing_or_linked_target(tmp_path: Path) -> None:
    archive = read_archive(with_files(), now=NOW)
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "root").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(FileExistsError):
        extract(archive, tmp_path / "root")
    assert list((tmp_path / "elsewhere").iterdir()) == []


def _snapshot(root: Path) -> dict[str, tuple[int, int]]:
    out: dict[str, tuple[int, int]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in {".git", ".venv", "node_modules"}]
        for name in filenames:
            path = Path(dirpath) / name
            try:
                st = path.lstat()
            except FileNotFoundError:
                continue
            out[str(path)] = (st.st_size, st.st_mtime_ns)
    return out


def _marked(roots: list[Path]) -> list[str]:
    found = []
    for root in roots:
        for dirpath, dirnames, filenames in os.walk(root):
            depth = len(Path(dirpath).relative_to(root).parts)
            if depth >= 3:
                dirnames[:] = []
            found += [f"{dirpath}/{n}" for n in [*dirnames, *filenames] if MARK in n]
    return found


def test_file_system_scan_nothing_written_outside_a_temporary_folder(
    pki: Pki, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Run the whole corpus through read-then-extract from inside a scratch folder."""
    repo = Path(__file__).resolve().parents[3]
    work = tmp_path / "cwd"
    work.mkdir()
    monkeypatch.chdir(work)
    before = _snapshot(repo)
    for case in CASES:
        parent = tmp_path / case.id
        parent.mkdir()
        _refuse(case, pki, parent)
        assert list(parent.iterdir()) == []
    assert _snapshot(repo) == before
    assert list(work.iterdir()) == []
    roots = [tmp_path, Path("/tmp"), Path.home(), repo.parent]
    assert _marked([r for r in roots if r.is_dir()]) == []
