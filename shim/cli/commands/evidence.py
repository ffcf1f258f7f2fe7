"""``gatehouse evidence``: export a run's signed evidence bundle, verify one offline, make a key.

``export`` reads the database directly, as ``gatehouse sql`` does, not the HTTP
API: a bundle holds every ledger entry's stored request and response bodies
(the API shows digests only), and it is signed with the deployment's private
key, which belongs on the operator's machine, not in the shim. ``verify`` needs
neither a database nor a network: the bundle and a public key.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from contracts import ErrorCode
from ledger import open_database, storage_full
from ledger.bundle import bundle_bytes, export_bundle
from ledger.bundle_verify import verify_bundle
from ledger.signing import SigningError, generate_key, load_signing_key, load_verify_key
from shim.cli.database import require_database
from shim.cli.errors import Exit, FailedError, UsageError
from shim.cli.options import database_option, database_url, json_option, run_id_argument

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="evidence_command", required=True, metavar="ACTION")
    export = sub.add_parser(
        "export", help="write a run's signed evidence bundle (reads the database directly)"
    )
    run_id_argument(export)
    export.add_argument("-o", "--output", type=Path, help="file to write (default RUN_ID.bundle)")
    export.add_argument(
        "--key",
        type=Path,
        help="the Ed25519 or ECDSA P-256 private key (PEM) to sign with"
        " (default: GATEHOUSE_SIGNING_KEY)",
    )
    database_option(export)
    verify = sub.add_parser(
        "verify", help="check a bundle offline; exit 1 naming the first thing that fails"
    )
    verify.add_argument("bundle", type=Path, help="the bundle file")
    verify.add_argument("--key", type=Path, required=True, help="the signer's public key (PEM)")
    json_option(verify, "the report")
    keygen = sub.add_parser(
        "keygen", help="write a new Ed25519 private key (0600) and its public key (.pub.pem)"
    )
    keygen.add_argument(
        "-o", "--output", type=Path, required=True, help="the private key file to create"
    )


def _public_path(private: Path) -> Path:
    return private.with_name(private.name.removesuffix(".pem") + ".pub.pem")


def _keygen(args: argparse.Namespace) -> int:
    out: Path = args.output
    public = _public_path(out)
    if out.exists():
        raise UsageError(f"{out} exists: a key is never overwritten")
    try:
        key = generate_key(out, public)
    except OSError as exc:
        raise UsageError(f"cannot write the key: {exc}") from exc
    sys.stdout.write(f"private key: {out} (keep it secret)\npublic key:  {public}\n")
    sys.stdout.write(f"key id:      {key.keyid}\n")
    return Exit.OK


def _write_whole(out: Path, data: bytes) -> None:
    """The bundle at ``out`` whole or not at all: written beside it, then renamed over it
    (a full disk leaves neither a truncated bundle nor the partial file behind)."""
    part = out.with_name(f".{out.name}.part")
    try:
        with part.open("wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        part.replace(out)
    finally:
        part.unlink(missing_ok=True)


def _export(args: argparse.Namespace) -> int:
    from_env = os.environ.get("GATEHOUSE_SIGNING_KEY")
    key_path = args.key or (Path(from_env) if from_env else None)
    if key_path is None:
        raise UsageError("no signing key: pass --key KEY.pem or set GATEHOUSE_SIGNING_KEY")
    try:
        key = load_signing_key(key_path.read_bytes(), str(key_path))
    except (OSError, SigningError) as exc:
        raise UsageError(f"cannot use the signing key {key_path}: {exc}") from exc
    url, source = database_url(args)
    require_database(url, source, read_only=True)
    db = open_database(url)
    try:
        with db.engine.connect() as conn:
            bundle = export_bundle(conn, args.run_id, key)
    finally:
        db.dispose()
    if bundle is None:
        raise FailedError(f"no run {args.run_id!r} in {source}")
    out: Path = args.output or Path(f"{args.run_id}.bundle")
    try:
        _write_whole(out, bundle_bytes(bundle))
    except OSError as exc:
        if not storage_full(exc):
            raise
        code = ErrorCode.STORAGE_FULL.value
        raise FailedError(
            f"{code}: cannot write {out}: the disk is full; nothing was written"
        ) from exc
    content = bundle["content"]
    assert isinstance(content, dict) and isinstance(content["ledger"], dict)
    sys.stdout.write(
        f"wrote {out}: run {args.run_id}, {content['ledger']['count']} ledger entries,"
        f" signed by key id {key.public.keyid}\n"
    )
    return Exit.OK


def _verify(args: argparse.Namespace) -> int:
    try:
        key = load_verify_key(args.key.read_bytes(), str(args.key))
        raw = args.bundle.read_bytes()
    except (OSError, SigningError) as exc:
        raise UsageError(str(exc)) from exc
    report = verify_bundle(raw, key)
    if args.json:
        sys.stdout.write(
            json.dumps({"ok": report.ok, "problem": report.problem, **report.facts}, indent=2)
            + "\n"
        )
    elif report.ok:
        f = report.facts
        sys.stdout.write(
            f"bundle verifies: run {f.get('run_id')}, signed by key id {f.get('signed_by')}\n"
            f"  plan digest   {f.get('plan_digest')}\n"
            f"  ledger        {f.get('entries')} entries, head {f.get('chain_head')}\n"
            f"  trace digest  {f.get('trace_digest')}\n"
            f"  checkpoints   {f.get('checkpoints')} ({f.get('signed_checkpoints')} signed)\n"
        )
    else:
        sys.stdout.write(f"bundle does NOT verify: {report.problem}\n")
    return Exit.OK if report.ok else Exit.FAILED


def run(args: argparse.Namespace) -> int:
    action = {"export": _export, "verify": _verify, "keygen": _keygen}
    return action[args.evidence_command](args)
