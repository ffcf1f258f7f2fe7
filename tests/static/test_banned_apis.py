"""APIs the product never uses (checked over the AST and the comment tokens).

* ``eval``, ``exec``, ``compile`` (the builtin), ``__import__``: no code from data.
* ``importlib``: any import of it (the handler registry is static), except
  ``from importlib import resources`` for reading package data, and
  ``from importlib import import_module`` in the CLI's command registry alone
  (``IMPORT_BY_NAME``: it imports the modules its literal dict names, and
  ``test_shim_layout.py`` holds it to that).
* ``pickle`` / ``marshal`` / ``shelve`` (and friends): data is JSON.
* ``shell=`` anything but the literal ``False``, ``os.system``, ``os.popen`` and
  the other shell-string runners: argv lists only.
* ``typing.cast``: validate with a model instead.
* ``preexec_fn``: unsafe in a multi-threaded worker.
* ``# type: ignore`` only as ``# type: ignore[code]  # reason``.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize

import pytest

from tests.static._source import Finding, Source, from_text, product_sources, report

BANNED_BUILTINS = frozenset({"eval", "exec", "compile", "__import__"})
BANNED_MODULES = {
    "importlib": "no dynamic import: the handler registry is static",
    "pickle": "workflow and step data are JSON, never pickle",
    "_pickle": "workflow and step data are JSON, never pickle",
    "cPickle": "workflow and step data are JSON, never pickle",
    "dill": "workflow and step data are JSON, never pickle",
    "cloudpickle": "workflow and step data are JSON, never pickle",
    "marshal": "data is JSON, never marshal",
    "shelve": "data is JSON, never shelve (it pickles)",
}
# module -> attribute -> why; both ``module.attr`` and ``from module import attr`` count.
BANNED_ATTRIBUTES: dict[str, dict[str, str]] = {
    "os": {
        "system": "os.system runs a shell string",
        "popen": "os.popen runs a shell string",
    },
    "subprocess": {
        "getoutput": "subprocess.getoutput runs a shell string",
        "getstatusoutput": "subprocess.getstatusoutput runs a shell string",
    },
    "asyncio": {"create_subprocess_shell": "create_subprocess_shell runs a shell string"},
    "typing": {"cast": "typing.cast: validate with a model instead"},
    "typing_extensions": {"cast": "typing.cast: validate with a model instead"},
    "builtins": {name: f"builtins.{name}: no code from data" for name in BANNED_BUILTINS},
}
# Where ``from importlib import import_module`` is allowed: the CLI imports a command's
# module only when that command is named, so that ``gatehouse --help`` starts without
# the database, the HTTP client and the contracts. Its argument is a literal of the
# literal registry beside it (checked in test_shim_layout.py), never data.
IMPORT_BY_NAME = "shim/cli/commands/__init__.py"
_TYPE_IGNORE = re.compile(r"type:\s*ignore")
_TAGGED_IGNORE = re.compile(
    r"#\s*type:\s*ignore\[[A-Za-z0-9_-]+(?:\s*,\s*[A-Za-z0-9_-]+)*\]\s*#\s*\S"
)


def _module_aliases(tree: ast.Module) -> dict[str, str]:
    """Local name -> module, for ``import os`` / ``import os as o`` anywhere in the file."""
    aliases: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname is not None:
                    aliases[alias.asname] = alias.name
                else:
                    top = alias.name.split(".")[0]
                    aliases[top] = top
    return aliases


def _names_imported_from_elsewhere(tree: ast.Module) -> set[str]:
    """Names bound by ``from m import x`` with ``m`` not builtins (``from re import compile``)."""
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module != "builtins":
            out.update(alias.asname or alias.name for alias in node.names)
    return out


def check_banned_calls(source: Source) -> list[Finding]:
    findings: list[Finding] = []
    aliases = _module_aliases(source.tree)
    shadowed = _names_imported_from_elsewhere(source.tree)

    def add(node: ast.expr | ast.stmt | ast.keyword, what: str) -> None:
        findings.append(Finding(source.rel, node.lineno, what))

    for node in ast.walk(source.tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                top = alias.name.split(".")[0]
                if top in BANNED_MODULES:
                    add(node, f"import {alias.name}: {BANNED_MODULES[top]}")
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module is not None:
            top = node.module.split(".")[0]
            names_only = {alias.name for alias in node.names}
            # Reading package data (schemas, migrations, policy files) by literal
            # package name is not dynamic import, nor is the CLI registry's import of
            # the modules it names; nothing else of importlib is allowed.
            allowed = {"resources"} | ({"import_module"} if source.rel == IMPORT_BY_NAME else set())
            if node.module == "importlib" and names_only <= allowed:
                pass
            elif top in BANNED_MODULES:
                names = ", ".join(alias.name for alias in node.names)
                add(node, f"from {node.module} import {names}: {BANNED_MODULES[top]}")
            banned = BANNED_ATTRIBUTES.get(node.module, {})
            for alias in node.names:
                if alias.name in banned:
                    add(node, f"from {node.module} import {alias.name}: {banned[alias.name]}")
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            if node.id in BANNED_BUILTINS and node.id not in shadowed:
                add(node, f"{node.id}: no code from data")
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            module = aliases.get(node.value.id)
            why = BANNED_ATTRIBUTES.get(module or "", {}).get(node.attr)
            if why is not None:
                add(node, why)
        elif isinstance(node, ast.keyword):
            if node.arg == "shell" and not (
                isinstance(node.value, ast.Constant) and node.value.value is False
            ):
                add(node, "shell= must be the literal False: argv lists only, never a shell")
            if node.arg == "preexec_fn":
                add(node, "preexec_fn= is unsafe in a multi-threaded process")
        elif isinstance(node, ast.Call):
            # ``f(**{"shell": True})`` spells the keyword as a dict key.
            for kw in node.keywords:
                if kw.arg is None and isinstance(kw.value, ast.Dict):
                    for key in kw.value.keys:
                        if isinstance(key, ast.Constant) and key.value in ("shell", "preexec_fn"):
                            add(kw, f"**{{{key.value!r}: ...}}: a banned keyword spelled as a key")
    return findings


def check_type_ignores(source: Source) -> list[Finding]:
    findings: list[Finding] = []
    tokens = tokenize.generate_tokens(io.StringIO(source.text).readline)
    for token in tokens:
        if token.type != tokenize.COMMENT or not _TYPE_IGNORE.search(token.string):
            continue
        if not _TAGGED_IGNORE.match(token.string):
            findings.append(
                Finding(
                    source.rel,
                    token.start[0],
                    f"{token.string.strip()!r}: write '# type: ignore[code]  # reason'",
                )
            )
    return findings


def test_no_banned_apis() -> None:
    findings = [f for s in product_sources() for f in check_banned_calls(s)]
    if findings:
        pytest.fail(report("banned APIs in the product", findings), pytrace=False)


def test_every_json_answer_is_the_apis_own() -> None:
    """The API answers JSON only through ``shim.api.http.Answer``, which turns a stored
    value no JSON can carry into a placeholder instead of a 500: no other module builds
    a bare ``JSONResponse`` (or ``ORJSONResponse``/``UJSONResponse``)."""
    bare = {"JSONResponse", "ORJSONResponse", "UJSONResponse"}
    findings = [
        Finding(s.rel, node.lineno, f"{alias.name} from {node.module}: answer with Answer")
        for s in product_sources()
        if s.rel != "shim/api/http.py"
        for node in ast.walk(s.tree)
        if isinstance(node, ast.ImportFrom)
        and node.module in ("fastapi.responses", "starlette.responses")
        for alias in node.names
        if alias.name in bare
    ]
    if findings:
        pytest.fail(report("JSON answered around shim.api.http.Answer", findings), pytrace=False)


def test_every_type_ignore_is_tagged_and_explained() -> None:
    findings = [f for s in product_sources() for f in check_type_ignores(s)]
    if findings:
        pytest.fail(report("untagged or unexplained '# type: ignore'", findings), pytrace=False)


def test_no_preexec_fn_anywhere() -> None:
    """Belt and braces over the AST check: no ``preexec_fn=`` in any text, even comments."""
    findings = [
        Finding(s.rel, number, "preexec_fn= appears")
        for s in product_sources()
        for number, line in enumerate(s.text.splitlines(), start=1)
        if re.search(r"preexec_fn\s*=", line)
    ]
    if findings:
        pytest.fail(report("preexec_fn=", findings), pytrace=False)


# --- self-checks ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "eval('1')\n",
        "exec('x = 1')\n",
        "code = compile('1', 'f', 'eval')\n",
        "m = __import__('os')\n",
        "run = eval\n",
        "import builtins\nbuiltins.exec('1')\n",
        "import importlib\n",
        "import importlib.util\n",
        "from importlib import import_module\n",
        "import pickle\n",
        "import marshal\n",
        "from shelve import open as shelf\n",
        "import subprocess\nsubprocess.run('ls', shell=True)\n",
        "import subprocess\nsubprocess.Popen(['ls'], shell=flag)\n",
        "import subprocess\nsubprocess.run(['ls'], **{'shell': True})\n",
        "import subprocess as sp\nsp.getoutput('ls')\n",
        "import os\nos.system('ls')\n",
        "import os as o\no.popen('ls')\n",
        "from os import system\n",
        "from typing import cast\n",
        "import typing\nx = typing.cast(int, y)\n",
        "import subprocess\nsubprocess.run(['ls'], preexec_fn=setup)\n",
        "def f():\n    import pickle\n",
    ],
)
def test_self_check_banned_calls_are_caught(text: str) -> None:
    assert check_banned_calls(from_text(text, "worker/bad.py")), text


def test_self_check_import_by_name_is_the_cli_registrys_alone() -> None:
    allowed = "from importlib import import_module\n"
    assert not check_banned_calls(from_text(allowed, IMPORT_BY_NAME))
    assert check_banned_calls(from_text(allowed, "shim/cli/_main.py"))
    assert check_banned_calls(from_text(allowed, "worker/handlers/__init__.py"))
    for other in ("import importlib\n", "from importlib import util\n"):
        assert check_banned_calls(from_text(other, IMPORT_BY_NAME)), other


@pytest.mark.parametrize(
    "text",
    [
        "import re\nre.compile('x')\n",
        "from re import compile\ncompile('x')\n",
        "import subprocess\nsubprocess.run(['ls'], shell=False)\n",
        "import ast\nast.literal_eval('1')\n",
        "import os\nos.environ.get('X')\n",
        "x = {'evaluate': 1}\n",
        "'''We never use preexec_fn here: it is unsafe with threads.'''\n",
    ],
)
def test_self_check_lookalikes_are_not_caught(text: str) -> None:
    assert not check_banned_calls(from_text(text, "worker/ok.py")), text


@pytest.mark.parametrize(
    ("text", "bad"),
    [
        ("x = f()  # type: ignore\n", True),
        ("x = f()  # type: ignore[no-any-return]\n", True),  # no reason
        ("x = f()  # type:ignore[attr-defined]   \n", True),
        ("x = f()  # type: ignore[attr-defined]  # dbos stubs lack it\n", False),
        ("x = f()  # type: ignore[misc, override]  # pydantic plugin quirk\n", False),
        ("x = 'type: ignore'\n", False),  # a string, not a comment
    ],
)
def test_self_check_type_ignores(text: str, bad: bool) -> None:
    assert bool(check_type_ignores(from_text(text, "ledger/x.py"))) is bad
