"""No child sessions: product code never uses a parent-session id, except where the ban
is enforced (the modules listed in ENFORCERS, which refuse and record parent ids).

Run alone with ``mise run policy:no-parentid``.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("contracts", "shim", "worker", "ledger", "policies")
# Modules allowed to name a parent id, because they are the ban.
ENFORCERS: frozenset[str] = frozenset({"worker/handlers/opencode/ban.py"})
PATTERN = re.compile(r"parent[_\-]?(session[_\-]?)?id", re.IGNORECASE)


def offenders(files: dict[str, str]) -> list[str]:
    found = []
    for rel, text in sorted(files.items()):
        if rel in ENFORCERS:
            continue
        for number, line in enumerate(text.splitlines(), 1):
            if PATTERN.search(line):
                found.append(f"{rel}:{number}: {line.strip()[:100]}")
    return found


def _product_files() -> dict[str, str]:
    return {
        str(p.relative_to(ROOT)): p.read_text("utf-8")
        for pkg in PRODUCT
        for p in (ROOT / pkg).rglob("*.py")
    }


def test_no_parent_session_ids_in_product_code() -> None:
    bad = offenders(_product_files())
    assert not bad, "parent-session ids outside the ban:\n" + "\n".join(bad)


def test_self_check_catches_the_spellings() -> None:
    for text in ('body["parentID"] = x', "parent_id = 1", "parentSessionId", "PARENT-SESSION-ID"):
        assert offenders({"worker/x.py": text}), text
    assert not offenders({"worker/x.py": "parent = session.id"})
