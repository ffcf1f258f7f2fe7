"""The one allowlist of what may reach a person as it is (``contracts.escaped``),
over every code point from U+0000 to U+10FFFF: it refuses exactly the class built
from ``unicodedata`` (``tests/unit/hidden_class.py``), the CLI's short cut never lets a
member through, and every escape is ASCII that reads back as its character."""

from __future__ import annotations

import json

import pytest

from contracts import Spelling, escaped, is_shown_as_is
from shim.cli.printable import surely_printable
from tests.unit.hidden_class import CLASS, LAYOUT, SAMPLE


def test_the_one_allowlist_refuses_exactly_the_class() -> None:
    wrong = [f"U+{c:04X}" for c in range(0x110000) if is_shown_as_is(chr(c)) == CLASS[c]]
    assert wrong == []


def test_what_the_cli_prints_without_the_contracts_is_part_of_the_allowlist() -> None:
    """``printable``'s short cut (taken before the contracts are loaded) never lets a
    member of the class through."""
    leaks = [f"U+{c:04X}" for c in range(0x110000) if CLASS[c] and surely_printable(chr(c))]
    assert leaks == [f"U+{c:04X}" for c in sorted(LAYOUT)]  # newline and tab lay out


@pytest.mark.parametrize("spelling", ["repr", "u", "json"])
def test_every_escape_is_ascii_and_names_its_character(spelling: Spelling) -> None:
    """Each member, surrogates included, spelled in ASCII that reads back as it; an
    escape is itself shown as it is, so escaping twice changes nothing."""
    for code in [*SAMPLE, *range(0xD800, 0xE000, 7)]:
        shown = escaped(chr(code), keep="", spelling=spelling)
        assert shown.isascii() and shown.startswith("\\"), hex(code)
        back = json.loads(f'"{shown}"') if spelling == "json" else _unescaped(shown)
        assert back == chr(code), hex(code)
        assert escaped(shown, spelling=spelling) == shown


def _unescaped(shown: str) -> str:
    return shown.encode("ascii").decode("unicode_escape", errors="surrogatepass")


def test_plain_text_of_every_script_is_left_as_it_is() -> None:
    text = "Grüße, 東京, Ελλάδα, עברית, مرحبا, हिन्दी, 한국어, ñ, é, 👍🏽, 1 000\u00a0€"
    assert escaped(text) == text
    assert escaped("a\nb\tc") == "a\nb\tc"
    assert escaped("a\nb", keep="") == "a\\u000ab"
