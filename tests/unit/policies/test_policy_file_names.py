"""A bad policy file stops the process with one line naming the file and the rule.

Every folder the catalog reads (profiles, tool pools, Cedar policy sets from
``GATEHOUSE_EXTRA_POLICIES``; recipes and output schemas shipped in the package,
read by the same code) is given each kind of hostile name and content: path
characters, ``..``, a name too long for an id, controls and non-ASCII, a name
that is not the id inside, JSON or Cedar that does not parse, bytes that are not
UTF-8, a folder where a file should be. Each must be a ``PolicyFileError``
whose message is one printable line that names the file; nothing may load.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from contracts import Recipe
from policies import catalog
from tests.support.extra_policies import extra_policies

SHIPPED = Path(catalog.__file__).parent

# (file name, what it holds): None for a folder in its place.
Make = Callable[[str], bytes | None]


def _json_with(folder: str, id_field: str, base: str) -> Make:
    """The shipped ``base`` file of ``folder``, declaring the id its name gives."""
    shipped = json.loads((SHIPPED / folder / f"{base}.json").read_text())

    def make(file_id: str) -> bytes:
        return json.dumps({**shipped, id_field: file_id}).encode()

    return make


def _permit(_: str) -> bytes:
    return b'@id("p")\npermit(principal, action, resource);\n'


def _cases(suffix: str, good: Make) -> list[tuple[str, bytes | None]]:
    """Hostile names holding good content, and good names holding hostile content."""
    names = [
        "Bad Name",  # a space and a capital
        "a..b",  # matches the id pattern, but never a file name
        "..",
        "x" * 65,  # one more than an id may have
        "evil\x1b[31mred",  # a terminal escape
        "bell\x07",
        "caf\u00e9",  # non-ASCII
        "rtl\u202eexe",  # a bidi override
        "-leading-dash",
        "new\nline",
    ]
    cases: list[tuple[str, bytes | None]] = [
        (f"{n}{suffix}", good(n.encode("ascii", "replace").decode().lower())) for n in names
    ]
    cases += [
        (f"not-the-id{suffix}", good("another-id")) if suffix == ".json" else ("", None),
        (f"broken{suffix}", b"{ this is not \n what it should be"),
        (f"latin1{suffix}", b'{"caf\xe9": 1}'),
        (f"folder{suffix}", None),
    ]
    return [c for c in cases if c[0]]


def _write(folder: Path, name: str, content: bytes | None) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    if content is None:
        (folder / name).mkdir()
    else:
        (folder / name).write_bytes(content)


def _assert_one_line(refused: pytest.ExceptionInfo[catalog.PolicyFileError], name: str) -> None:
    message = str(refused.value)
    assert "\n" not in message and "\r" not in message, message
    assert message.isprintable() and message.isascii(), ascii(message)
    shown = name.encode("unicode_escape").decode("ascii")[:60]
    assert shown in message, (name, message)


EXTRA = [
    ("profiles", ".json", _json_with("profiles", "profile_id", "default")),
    ("tool_pools", ".json", _json_with("tool_pools", "tool_pool_id", "default")),
    ("cedar", ".cedar", _permit),
]


@pytest.mark.parametrize(
    ("sub", "name", "content"),
    [(sub, name, content) for sub, suffix, good in EXTRA for name, content in _cases(suffix, good)],
    ids=lambda v: ascii(v)[:40] if isinstance(v, str) else "",
)
def test_an_operators_bad_policy_file_is_one_line(
    tmp_path: Path, sub: str, name: str, content: bytes | None
) -> None:
    _write(tmp_path / sub, name, content)
    with extra_policies(tmp_path), pytest.raises(catalog.PolicyFileError) as refused:
        catalog.load_all()
    _assert_one_line(refused, name)


@pytest.mark.parametrize(
    ("name", "content"),
    _cases(".json", _json_with("recipes", "recipe_id", "echo")),
    ids=lambda v: ascii(v)[:40] if isinstance(v, str) else "",
)
def test_a_bad_recipe_file_is_one_line(tmp_path: Path, name: str, content: bytes | None) -> None:
    """Recipes ship in the package only; the same reader checks them, given this folder."""
    _write(tmp_path, name, content)
    with pytest.raises(catalog.PolicyFileError) as refused:
        catalog._load_folder("policies.recipes", Recipe, "recipe_id", tmp_path)
    _assert_one_line(refused, name)


def test_good_names_still_load(tmp_path: Path) -> None:
    """The rule refuses what it must and no more: dots, colons and dashes load."""
    for file_id in ("acme.read-only", "team:payments_2"):
        _write(
            tmp_path / "profiles",
            f"{file_id}.json",
            _json_with("profiles", "profile_id", "default")(file_id),
        )
    with extra_policies(tmp_path):
        catalog.load_all()
        assert catalog.profile("team:payments_2").model.profile_id == "team:payments_2"
