"""docs/examples/client_example.py runs as a user would run it: a program of its own,
talking HTTP to a served shim with the two tokens ``gatehouse up`` makes, blocking
then asyncio; what it prints is what docs/client.md says it prints."""

from __future__ import annotations

import os
import re
import subprocess
import sys

from contracts import Role
from shim.tokens import add_token
from tests.static._source import REPO_ROOT
from tests.support.served import ServedShim
from tests.support.stack import Stack

EXAMPLE = REPO_ROOT / "docs" / "examples" / "client_example.py"
DOC = REPO_ROOT / "docs" / "client.md"
MARK = "<!-- client-example-output -->"
PLACEHOLDERS = {"<run-id>": r"run_[0-9a-f]{32}", "<digest>": r"[0-9a-f]{64}"}


def documented_output() -> list[str]:
    """The lines docs/client.md shows under its output mark, as patterns."""
    text = DOC.read_text(encoding="utf-8")
    block = text.split(MARK, 1)[1].split("```text\n", 1)[1].split("```", 1)[0]
    patterns = []
    for line in block.splitlines():
        pattern = re.escape(line)
        for placeholder, regex in PLACEHOLDERS.items():
            pattern = pattern.replace(re.escape(placeholder), regex)
        patterns.append(pattern)
    return patterns


def test_the_client_example_prints_what_its_doc_shows(stack: Stack) -> None:
    people = stack.client.people
    # gatehouse up's local tokens: a submitter and an approver, each also an operator
    submitter = add_token(people.file, "local-submitter", [Role.SUBMITTER, Role.OPERATOR])
    approver = add_token(people.file, "local-approver", [Role.APPROVER, Role.OPERATOR])
    with ServedShim(stack.database_url, people.file) as url:
        env = {
            **os.environ,
            "GATEHOUSE_URL": url,
            "GATEHOUSE_TOKEN": submitter,
            "GATEHOUSE_APPROVER_TOKEN": approver,
        }
        done = subprocess.run(
            [sys.executable, str(EXAMPLE)],
            env=env, capture_output=True, text=True, timeout=300, check=False,
        )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    printed = done.stdout.splitlines()
    expected = documented_output()
    assert len(printed) == len(expected), (printed, expected)
    for line, pattern in zip(printed, expected, strict=True):
        assert re.fullmatch(pattern, line), (line, pattern)
    # the first run's id is the same on each of its lines
    first = {line.split(":")[0] for line in printed[:4] if line.startswith("run_")}
    assert len(first) == 1, printed
