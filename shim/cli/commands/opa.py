"""``gatehouse opa``: validate, run and fetch OPA archives, and manage the trust store.

``opa inspect FILE`` runs the full validation (``opa_format.read_archive``)
against the trust store and prints the manifest, the signature status and
signer, and the entries with their sizes. Exit codes: 0 valid, 1 any defect
(the error code and message are printed), 2 a usage error (unreadable file,
bad certificate file, unknown name).

``opa run FILE`` posts the archive to a running shim (``POST /intent``), which
validates it again and answers with the run; ``opa reply RUN_ID TEXT`` sends
an interactive run its next message (``--end`` closes the session); ``opa
output RUN_ID`` downloads the run's output archive. Exit codes: 0 done, 1
refused by the shim or the shim unreachable (the code and message are printed),
2 a usage error.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

from contracts import GatehouseError
from opa_format import (
    DEFAULT_TRUST_DIR,
    Archive,
    TrustStore,
    read_archive,
    trust_add,
    trust_list,
    trust_remove,
)
from shim.cli.client import dump
from shim.cli.errors import Exit, FailedError, UsageError
from shim.cli.options import api_options, connect, json_option, run_id_argument

__all__ = ["add_arguments", "run"]

_MEDIA_TYPES = {".opa.jar": "application/java-archive", ".opa": "application/vnd.opa+zip"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    trust_default = os.environ.get("GATEHOUSE_OPA_TRUST_DIR", DEFAULT_TRUST_DIR)
    sub = parser.add_subparsers(dest="opa_command", required=True, metavar="ACTION")
    inspect = sub.add_parser(
        "inspect", help="validate FILE.opa and show manifest, signer, entries; non-zero on defects"
    )
    inspect.add_argument("file", type=Path, help="the archive (.opa or .opa.jar)")
    json_option(inspect, "the result")
    trust = sub.add_parser("trust", help="the certificates archives may be signed under")
    actions = trust.add_subparsers(dest="trust_command", required=True, metavar="ACTION")
    add = actions.add_parser("add", help="trust a PEM certificate (a signer or a CA)")
    add.add_argument("cert", type=Path, help="a PEM certificate file")
    add.add_argument("--name", help="file name in the store (default: fingerprint head)")
    actions.add_parser("list", help="subject, issuer, SHA-256 fingerprint, not-after")
    remove = actions.add_parser("remove", help="stop trusting a certificate")
    remove.add_argument("name", metavar="NAME|FINGERPRINT", help="as `opa trust list` shows it")
    run = sub.add_parser("run", help="submit FILE.opa as an intent; prints the run id and links")
    run.add_argument("file", type=Path, help="the archive to submit (.opa or .opa.jar)")
    run.add_argument(
        "--mode",
        choices=["batch", "autonomous", "interactive"],
        help="instead of the manifest's Execution-Mode",
    )
    run.add_argument("--recipe", help="a recipe the profile allows for archives")
    run.add_argument("--profile", help="the policy profile (default: default)")
    run.add_argument("--pool", help="the tool pool (default: default)")
    run.add_argument("--idempotency-key", help="a repeated key returns the same run")
    output = sub.add_parser("output", help="download a run's output archive")
    run_id_argument(output)
    output.add_argument(
        "-o", "--output", type=Path, help="file to write (default RUN_ID.output.opa)"
    )
    reply = sub.add_parser(
        "reply", help="send an interactive run its next message (a new turn to plan and approve)"
    )
    run_id_argument(reply, "the interactive run's id (run_…)")
    reply.add_argument("text", nargs="?", help="the message (omit it with --end)")
    reply.add_argument("--end", action="store_true", help="close the session: the run ends")
    for p in (run, output, reply):
        api_options(p, with_json=False)
    for p in (inspect, add, actions.choices["list"], remove):
        p.add_argument(
            "--trust-dir",
            type=Path,
            default=Path(trust_default),
            help=f"the trust store (default: GATEHOUSE_OPA_TRUST_DIR or {DEFAULT_TRUST_DIR})",
        )


def run(args: argparse.Namespace) -> int:
    if args.opa_command == "inspect":
        return _inspect(args.file, args.trust_dir, as_json=args.json)
    if args.opa_command == "run":
        return _run(args)
    if args.opa_command == "output":
        return _output(args)
    if args.opa_command == "reply":
        return _reply(args)
    try:
        if args.trust_command == "add":
            entry = trust_add(args.trust_dir, args.cert.read_bytes(), args.name)
            print(f"trusted {entry.name}: {entry.subject} ({entry.fingerprint_sha256})")
        elif args.trust_command == "remove":
            entry = trust_remove(args.trust_dir, args.name)
            print(f"removed {entry.name}: {entry.subject} ({entry.fingerprint_sha256})")
        else:
            for e in trust_list(args.trust_dir):
                ca = " CA" if e.is_ca else ""
                print(f"{e.name}{ca}\n  subject      {e.subject}\n  issuer       {e.issuer}")
                print(f"  sha256       {e.fingerprint_sha256}\n  not after    {e.not_after}")
    except (OSError, GatehouseError) as exc:
        message = exc.message if isinstance(exc, GatehouseError) else str(exc)
        raise UsageError(message) from exc
    return Exit.OK


def _run(args: argparse.Namespace) -> int:
    """``opa run FILE``: post the archive; print the run as ``gatehouse submit`` does."""
    path: Path = args.file
    media = next((m for end, m in _MEDIA_TYPES.items() if path.name.endswith(end)), None)
    if media is None:
        raise UsageError(f"{path} must end .opa or .opa.jar")
    try:
        content = path.read_bytes()
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror}") from exc
    asked = {
        "mode": args.mode,
        "recipe": args.recipe,
        "policy_profile": args.profile,
        "tool_pool": args.pool,
    }
    params = {"name": path.name} | {k: v for k, v in asked.items() if v}
    with connect(args) as api:
        accepted = api.submit_archive(content, media, params, args.idempotency_key)
    print(json.dumps(dump(accepted), indent=2))
    return Exit.OK


def _output(args: argparse.Namespace) -> int:
    """``opa output RUN_ID``: write the run's output archive to a file."""
    with connect(args) as api:
        archive = api.output_archive(args.run_id)
    target: Path = args.output or Path(f"{args.run_id}.output.opa")
    try:
        target.write_bytes(archive)
    except OSError as exc:
        raise UsageError(f"cannot write {target}: {exc.strerror}") from exc
    print(f"wrote {target} ({len(archive)} bytes)")
    return Exit.OK


def _reply(args: argparse.Namespace) -> int:
    """``opa reply RUN_ID TEXT`` (or ``--end``): the next turn of an interactive run."""
    if (args.text is None) != args.end:
        raise UsageError("give the message text, or --end (not both)")
    with connect(args) as api:
        accepted = api.message(args.run_id, args.text, end=args.end)
    print(json.dumps(dump(accepted), indent=2))
    return Exit.OK


def _inspect(path: Path, trust_dir: Path, *, as_json: bool) -> int:
    try:
        trust = TrustStore.load(trust_dir)
        archive = read_archive(path, trust=trust)
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror}") from exc
    except ValueError as exc:  # a PEM file in the trust store that is not a certificate
        raise UsageError(f"the trust store {trust_dir} is unreadable: {exc}") from exc
    except GatehouseError as exc:
        if as_json:
            print(json.dumps({"valid": False, "error": exc.to_json()}, indent=2))
        raise FailedError(f"{path}: {exc.code.value}: {exc.message}") from exc
    if as_json:
        print(json.dumps({"valid": True, **archive.to_json()}, indent=2))
    else:
        print(_text(archive))
    return Exit.OK


def _text(a: Archive) -> str:
    m = a.manifest
    lines = [
        f"archive     {a.name}  ({a.size} bytes, sha256 {a.sha256})",
        "valid       yes",
        f"manifest    OPA-Version {m.opa_version}, Execution-Mode {m.execution_mode},"
        f" Prompt-File {m.prompt_file}",
    ]
    lines += [f"            {k}: {v}" for k, v in m.attributes.items()]
    s = a.signature
    if s.signed and s.signer is not None:
        lines.append(f"signature   valid ({s.digest_algorithm}, {s.block})")
        lines.append(f"signer      {s.signer.subject}  (issuer {s.signer.issuer})")
        signer = s.signer
        lines.append(f"            sha256 {signer.fingerprint_sha256}, until {signer.not_after}")
        lines.append(f"            trusted by {s.signer.trusted_by}")
    else:
        lines.append("signature   none (unsigned: refused in autonomous mode unless allowed)")
    history = len(a.history.messages) if a.history else 0
    lines.append(f"prompt      {len(a.prompt.encode())} bytes; history {history} message(s)")
    total = sum(e.size for e in a.entries)
    lines.append(f"entries     {len(a.entries)}, {total} bytes uncompressed")
    lines += [f"  {e.size:>10}  {e.compressed_size:>10}  {e.name}" for e in a.entries]
    return "\n".join(lines)
