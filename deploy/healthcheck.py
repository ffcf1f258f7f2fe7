"""A container's health check, run inside the image (compose.yaml wires it).

    python /opt/gatehouse/healthcheck.py readyz URL [CERT]
        the shim: healthy when URL/readyz answers 200 (the database answers, the
        migrations are applied, a worker of the shim's version is live); CERT: the
        PEM certificate the shim serves, trusted as it is (no name check: the probe
        comes from inside the container, by 127.0.0.1)
    python /opt/gatehouse/healthcheck.py worker
        a worker: healthy when its executor id (GATEHOUSE_EXECUTOR_ID) has sent a
        heartbeat within GATEHOUSE_DEAD_AFTER_S (default 6 s) and was not reaped, in
        the database of GATEHOUSE_DATABASE_URL

Exit 0 healthy, 1 not (the reason on stderr).
"""

from __future__ import annotations

import os
import ssl
import sys
import urllib.error
import urllib.request


def readyz(url: str, cert: str | None) -> str | None:
    context = None
    if cert:
        context = ssl.create_default_context(cafile=cert)
        context.check_hostname = False
        context.verify_flags |= ssl.VERIFY_X509_PARTIAL_CHAIN
    try:
        # a fixed URL from compose.yaml: http or https only
        with urllib.request.urlopen(f"{url}/readyz", timeout=5, context=context) as answer:  # noqa: S310
            return None if answer.status == 200 else f"/readyz answered {answer.status}"
    except urllib.error.HTTPError as exc:
        return f"/readyz answered {exc.code}: {exc.read(500).decode(errors='replace')}"
    except OSError as exc:
        return f"{url}/readyz: {exc}"


def worker() -> str | None:
    # imported here: the shim's check needs nothing of Gatehouse, and answers fast
    from ledger import executors, open_database, resolve_database_url  # noqa: PLC0415

    executor_id = os.environ.get("GATEHOUSE_EXECUTOR_ID", "")
    dead_after_s = float(os.environ.get("GATEHOUSE_DEAD_AFTER_S") or 6)
    db = open_database(resolve_database_url()[0])
    try:
        with db.engine.connect() as conn:
            found = [e for e in executors.list_executors(conn) if e.executor_id == executor_id]
    finally:
        db.dispose()
    if not found:
        return f"no heartbeat from {executor_id!r} yet"
    if found[0].reaped_at is not None:
        return f"{executor_id} was declared dead at {found[0].reaped_at}"
    if found[0].heartbeat_age_s > dead_after_s:
        return f"{executor_id}'s last heartbeat was {found[0].heartbeat_age_s:.1f} s ago"
    return None


def main(argv: list[str]) -> int:
    if argv[:1] == ["readyz"] and len(argv) in (2, 3):
        reason = readyz(argv[1], argv[2] if len(argv) == 3 else None)
    elif argv == ["worker"]:
        reason = worker()
    else:
        sys.stderr.write(__doc__ or "")
        return 2
    if reason:
        sys.stderr.write(f"unhealthy: {reason}\n")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
