"""The README and docs say what the code does: codes, routes, commands, tasks, settings.

The README is the two commands and a tutorial (its output is checked by
tests/e2e/test_tutorial_first_run.py); the reference it links to is in docs/.
"""

from __future__ import annotations

import argparse
import re
import tomllib
from pathlib import Path

import pytest

from contracts import ErrorCode
from shim.api import create_app
from shim.api.http import served_routes
from shim.cli import COMMANDS, EXIT_CODES, build_parser
from shim.settings import ShimSettings

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text("utf-8")
DOC = ROOT / "docs"
CLI = (DOC / "cli.md").read_text("utf-8")  # commands, exit codes, run statuses
API = (DOC / "api.md").read_text("utf-8")  # routes, roles, error codes
CONFIGURATION = (DOC / "configuration.md").read_text("utf-8")  # settings
DEVELOPMENT = (DOC / "development.md").read_text("utf-8")  # mise tasks
PRODUCT = ("contracts", "shim", "worker", "ledger", "policies", "opa_format")


def _table_rows(text: str, first_cell: str) -> list[list[str]]:
    rows = []
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and cells and re.fullmatch(first_cell, cells[0]):
            rows.append(cells)
    return rows


def test_the_two_commands() -> None:
    assert "npx -y @jdxcode/mise run demo" in README
    assert "npx -y @jdxcode/mise run check" in README
    assert "mise run check" in (ROOT / ".ci" / "run").read_text()


def test_every_error_code_is_listed_with_its_number_and_status() -> None:
    rows = {r[0].strip("`"): r for r in _table_rows(API, r"`[a-z_]+`")}
    for code in ErrorCode:
        assert code.value in rows, f"docs/api.md's error table lacks {code.value}"
        _, number, status, retryable, meaning = rows[code.value][:5]
        assert number == str(code.spec.number), code
        assert status == str(code.http_status), code
        assert retryable == ("yes" if code.retryable else "no"), code
        assert meaning == code.spec.summary, code
    listed = {k for k, r in rows.items() if len(r) == 5 and r[1].isdigit()}
    assert listed <= {c.value for c in ErrorCode}, "docs/api.md lists codes that do not exist"


def test_every_route_is_documented() -> None:
    app = create_app(ShimSettings.from_env({}))
    documented = {r[0].strip("`") for r in _table_rows(API, r"`(GET|POST) /[^`]*`")}
    actual = set()
    for route in served_routes(app):
        path = getattr(route, "path", "")
        if path.startswith(("/docs", "/redoc", "/openapi")):
            continue
        for method in sorted(getattr(route, "methods", set()) - {"HEAD", "OPTIONS"}):
            actual.add(f"{method} {path}")
    assert actual == documented


def test_every_cli_command_is_documented_and_has_help(capsys: pytest.CaptureFixture[str]) -> None:
    documented = {r[0].strip("`").split()[1] for r in _table_rows(CLI, r"`gatehouse [a-z-]+`")}
    assert documented == set(COMMANDS)
    for name in COMMANDS:
        with pytest.raises(SystemExit) as done:
            build_parser().parse_args([name, "--help"])
        assert done.value.code == 0
        assert COMMANDS[name].HELP in capsys.readouterr().out.replace("\n", " ").replace("  ", " ")


def _section(text: str, title: str) -> str:
    start = text.index(title)
    end = text.find("\n#", start + len(title))
    return text[start : end if end != -1 else None]


def test_every_mise_task_is_documented() -> None:
    tasks = set(tomllib.loads((ROOT / "mise.toml").read_text())["tasks"])
    section = _section(DEVELOPMENT, "## mise tasks")
    documented = {r[0].strip("`") for r in _table_rows(section, r"`[a-z0-9:-]+`") if len(r) == 2}
    assert tasks == documented


def test_every_setting_is_documented() -> None:
    used: set[str] = set()
    sources = [
        p for pkg in (*PRODUCT, "bench", "tests/support") for p in (ROOT / pkg).rglob("*.py")
    ]
    for path in [*sources, ROOT / "tests" / "conftest.py"]:
        used |= set(re.findall(r"\"(GATEHOUSE_[A-Z_]+)\"", path.read_text("utf-8")))
    documented = {r[0].strip("`") for r in _table_rows(CONFIGURATION, r"`GATEHOUSE_[A-Z_]+`")}
    assert used == documented


def test_architecture_names_every_package() -> None:
    text = (ROOT / "docs" / "architecture.md").read_text("utf-8")
    for folder in (*PRODUCT, "vendor", "tests", "bench", "docs"):
        assert f"`{folder}/`" in text, folder


def test_docs_exist() -> None:
    for name in (
        "architecture.md",
        "operators.md",
        "security.md",
        "benchmarks.md",
        "cli.md",
        "api.md",
        "configuration.md",
        "features.md",
        "development.md",
        "limitations.md",
    ):
        assert (ROOT / "docs" / name).is_file(), name


def test_operator_views_are_documented() -> None:
    text = (ROOT / "docs" / "operators.md").read_text("utf-8")
    for view in (ROOT / "ledger" / "views").glob("*.sql"):
        assert view.stem in text, view.stem


DOCS = {"README.md": README} | {
    str(p.relative_to(ROOT)): p.read_text("utf-8") for p in sorted(DOC.rglob("*.md"))
}


def _code_spans(text: str) -> list[str]:
    """Inline code spans and the lines of fenced blocks: where commands are written."""
    fenced = re.findall(r"```[a-z]*\n(.*?)```", text, flags=re.DOTALL)
    lines = [line for block in fenced for line in block.splitlines()]
    prose = re.sub(r"```[a-z]*\n.*?```", "", text, flags=re.DOTALL)
    return lines + re.findall(r"`([^`\n]+)`", prose)


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _options(parser: argparse.ArgumentParser) -> set[str]:
    return {o for a in parser._actions for o in a.option_strings}


def documented_invocations(docs: dict[str, str]) -> list[tuple[str, str, list[str]]]:
    """(doc, command words, --options) for every `gatehouse …` the docs write down."""
    found = []
    for doc, text in docs.items():
        for span in _code_spans(text):
            for m in re.finditer(
                r"(?:^|[\s/])gatehouse ((?:[a-z][a-z-]*)(?: [a-z][a-z-]*)?)(.*)", span
            ):
                rest = m.group(2).split("#")[0]
                found.append((doc, m.group(1), re.findall(r"(?<![\w-])--[a-z][a-z-]*", rest)))
    return found


def _undocumented(docs: dict[str, str]) -> list[str]:
    """What the docs write as `gatehouse CMD [ACTION] --opt` that does not parse."""
    commands = _subparsers(build_parser())
    wrong = []
    for doc, words, options in documented_invocations(docs):
        name, _, action = words.partition(" ")
        if name not in commands:
            wrong.append(f"{doc}: `gatehouse {name}` is not a command")
            continue
        parser = commands[name]
        actions = _subparsers(parser)
        if actions and action in actions:
            parser = actions[action]
        known = _options(parser)
        wrong += [f"{doc}: `gatehouse {words}` has no {o}" for o in options if o not in known]
    return wrong


def test_every_documented_command_and_option_exists() -> None:
    """Every `gatehouse CMD [ACTION] --opt` in README.md and docs/*.md parses as written."""
    assert len(documented_invocations(DOCS)) > 40, "the docs' commands were not found"
    assert _undocumented(DOCS) == []
    # and the check can fail
    made_up = {"x.md": "`gatehouse runs --bogus` and\n```sh\ngatehouse nope\n```\n"}
    assert _undocumented(made_up) == [
        "x.md: `gatehouse nope` is not a command",
        "x.md: `gatehouse runs` has no --bogus",
    ]


def test_every_option_has_help() -> None:
    def walk(parser: argparse.ArgumentParser, path: str) -> list[str]:
        missing = []
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    missing += walk(sub, f"{path} {name}")
            elif not isinstance(action, argparse._HelpAction) and not action.help:
                missing.append(f"{path} {'/'.join(action.option_strings) or action.dest}")
        return missing

    assert walk(build_parser(), "gatehouse") == []


def test_exit_codes_are_documented() -> None:
    rows = {r[0]: r[1] for r in _table_rows(CLI, r"[0-9]{1,3}") if len(r) == 2}
    assert rows == {str(k): v for k, v in EXIT_CODES.items()}


def test_docs_list_every_run_status() -> None:
    from contracts import RunStatus

    statuses = {s.value for s in RunStatus}
    cli = re.search(r"Run statuses: (.*?)\.\n", CLI, flags=re.DOTALL)
    assert cli is not None
    assert set(re.findall(r"`([a-z_]+)`", cli.group(1))) == statuses
    runs_row = _table_rows(DOCS["docs/operators.md"], r"`runs`")
    assert len(runs_row) == 1
    listed = re.search(r"`status` \(([a-z_, ]+)\)", runs_row[0][1])
    assert listed is not None and set(listed.group(1).split(", ")) == statuses
    assert "no resolve command" not in DOCS["docs/operators.md"]


def test_the_cli_version_is_the_package_version() -> None:
    from shim import __version__

    assert __version__ == tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]


def _anchors(markdown: str) -> set[str]:
    """GitHub's ids of a page's headings (lowercase, punctuation dropped, spaces to -)."""
    text = re.sub(r"```.*?```", "", markdown, flags=re.DOTALL)
    headings = re.findall(r"^#{1,6} (.+)$", text, flags=re.MULTILINE)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in headings}


def test_the_readme_is_the_way_in() -> None:
    """Short: the two commands, the tutorial, then links into the reference in docs/."""
    assert len(README.splitlines()) < 250
    headings = re.findall(r"^## (.+)$", README, flags=re.MULTILINE)
    assert headings[:2] == ["Two commands", "Your first run, in 15 minutes"]
    for name in ("cli", "api", "configuration", "features", "development", "limitations"):
        assert f"](docs/{name}.md)" in README, name


def test_links_between_the_docs_resolve() -> None:
    """Every relative link in README.md and docs/ names a file that is there, and a
    heading of it when it names one."""
    broken = []
    for doc, text in DOCS.items():
        here = (ROOT / doc).parent
        prose = re.sub(r"```.*?```", "", text, flags=re.DOTALL)
        for target in re.findall(r"\]\(([^)\s]+)\)", prose):
            if re.match(r"[a-z]+:", target):
                continue  # https:, mailto:
            path, _, anchor = target.partition("#")
            file = (here / path).resolve() if path else ROOT / doc
            if not file.exists():
                broken.append(f"{doc}: {target} (no such file)")
            elif anchor and file.suffix == ".md" and anchor not in _anchors(file.read_text()):
                broken.append(f"{doc}: {target} (no such heading)")
    assert broken == []


# "A section" (and "another") in [a page](path), or in docs/page.md, or in the README:
# a section named by its title in prose, and the page it is said to be in.
_NAMED = re.compile(
    r'((?:"[^"]+"(?:,\s*|\s+and\s+))*"[^"]+")\s+in\s+(?:the\s+)?'
    r"(?:\[[^\]]*\]\(([^)#\s]+)\)|(docs/[\w/.-]+\.md|README(?:\.md)?)\b)"
)


def _titles(markdown: str) -> list[str]:
    text = re.sub(r"```.*?```", "", markdown, flags=re.DOTALL)
    return [" ".join(h.split()).lower() for h in re.findall(r"^#{1,6} (.+)$", text, flags=re.M)]


def test_sections_named_in_prose_are_in_the_page_linked() -> None:
    """A section named by its title beside a link ("Exactly once" in [architecture.md])
    is a heading of that page: the tutorial once sent readers to the README for
    sections that live in docs/configuration.md, where no link's anchor would show it."""
    wrong = []
    checked = 0
    for doc, text in DOCS.items():
        prose = re.sub(r"```.*?```", "", text, flags=re.DOTALL)
        for names, linked, bare in _NAMED.findall(prose):
            checked += 1
            path = linked or bare
            if bare:  # a page named in prose, from the repository's root
                path = "README.md" if bare.startswith("README") else bare
                target = ROOT / path
            else:
                target = ((ROOT / doc).parent / path).resolve()
            if target.suffix != ".md" or not target.exists():
                continue  # a missing file is test_links_between_the_docs_resolve's to report
            titles = _titles(target.read_text("utf-8"))
            for name in re.findall(r'"([^"]+)"', names):
                said = " ".join(name.split()).lower()
                if not any(t.startswith(said) for t in titles):
                    wrong.append(f'{doc}: "{name}" is no heading of {path}')
    assert checked > 0  # the pattern still finds the sections the docs name
    assert wrong == []
