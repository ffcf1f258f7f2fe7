"""What of a text may reach a person as it is: the one allowlist every surface uses.

Objectives, titles, inputs, outputs, names and messages come from submitters,
models, tools and outside data. A person reads them in a terminal, on the
dashboard, in Slack or in an email, and decides on what they read, so a
character that draws nothing, draws something it is not, reorders the line or
drives the terminal must not reach them raw. A character is shown as it is
only when it is printable and not a format character: its general category is
none of Cc (controls), Cf (format: bidi, zero-width, tags), Cs (surrogates), Co
(private use), Cn (unassigned), Zl and Zp (line and paragraph separators), and it
is not a default-ignorable code point (which takes in the variation selectors,
the combining grapheme joiner, the Hangul fillers and the Khmer inherent vowels,
drawn as nothing although they are letters or marks). Every other character is
spelled as its escape, in ASCII, so that an escape is itself shown as it is and
escaping twice changes nothing.

The CLI decides what is plainly printable before it loads the contracts, which
take a while to import (``shim/cli/printable.py``).
"""

from __future__ import annotations

import unicodedata
from typing import Literal

from contracts._json import JsonObject, JsonValue

__all__ = ["Spelling", "escaped", "escaped_strings", "is_shown_as_is"]

# General categories of what is never shown as it is.
_REFUSED_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})

# Default_Ignorable_Code_Point, from the Unicode Character Database
# (DerivedCoreProperties.txt): drawn as nothing whatever their category. Most are
# Cf or Cn already; the marks and letters among them (U+034F, U+115F, U+1160,
# U+17B4, U+17B5, U+180B-U+180D, U+180F, U+3164, U+FE00-U+FE0F, U+FFA0,
# U+E0100-U+E01EF) are why this list exists.
_IGNORABLE = (
    (0x00AD, 0x00AD), (0x034F, 0x034F), (0x061C, 0x061C), (0x115F, 0x1160),
    (0x17B4, 0x17B5), (0x180B, 0x180F), (0x200B, 0x200F), (0x202A, 0x202E),
    (0x2060, 0x206F), (0x3164, 0x3164), (0xFE00, 0xFE0F), (0xFEFF, 0xFEFF),
    (0xFFA0, 0xFFA0), (0xFFF0, 0xFFF8), (0x1BCA0, 0x1BCA3), (0x1D173, 0x1D17A),
    (0xE0000, 0xE0FFF),
)  # fmt: skip

# How an escape is spelled: ``repr`` as Python's repr (\x1b, \u202e, \U000e0030), what
# the CLI's streams have always written; ``u`` always four digits (\u001b) and eight
# past the BMP (\U000e0030); ``json`` as JSON spells a string's character (\u001b,
# \udb40\udc30 past the BMP), so that JSON shown with its escapes still parses to
# the same value (the dashboard's plan editor sends it back).
Spelling = Literal["repr", "u", "json"]


def is_shown_as_is(char: str) -> bool:
    """Whether the one character ``char`` may reach a person as it is."""
    if unicodedata.category(char) in _REFUSED_CATEGORIES:
        return False
    code = ord(char)
    return not any(low <= code <= high for low, high in _IGNORABLE)


def _spelled(code: int, spelling: Spelling) -> str:
    if code >= 0x10000:
        if spelling != "json":
            return f"\\U{code:08x}"
        high, low = divmod(code - 0x10000, 0x400)
        return f"\\u{0xD800 + high:04x}\\u{0xDC00 + low:04x}"
    if code < 0x100 and spelling == "repr":
        return f"\\x{code:02x}"
    return f"\\u{code:04x}"


# How many characters a table remembers: text from outside could otherwise make a
# long-lived process hold an entry for each of Unicode's million code points.
_REMEMBERED = 8192


class _Escapes(dict[int, str]):
    """A ``str.translate`` table filled as characters are met: deciding all of
    Unicode up front would cost every process a second."""

    def __init__(self, keep: str, spelling: Spelling) -> None:
        super().__init__({ord(c): c for c in keep})
        self.spelling: Spelling = spelling

    def __missing__(self, code: int) -> str:
        char = chr(code)
        shown = char if is_shown_as_is(char) else _spelled(code, self.spelling)
        if len(self) < _REMEMBERED:
            self[code] = shown
        return shown


_TABLES: dict[tuple[str, Spelling], _Escapes] = {}


def escaped(text: str, *, keep: str = "\n\t", spelling: Spelling = "u") -> str:
    """``text`` with every character the allowlist refuses spelled as its escape;
    the characters of ``keep`` (newline and tab, by default) stay as they are."""
    table = _TABLES.get((keep, spelling))
    if table is None:
        table = _TABLES.setdefault((keep, spelling), _Escapes(keep, spelling))
    return text.translate(table)


def escaped_strings(message: JsonObject) -> JsonObject:
    """A JSON object with every string in it, keys included, ``escaped``: a message
    (Slack's text and blocks) whose every text may reach a person."""
    return {escaped(k): _escaped_value(v) for k, v in message.items()}


def _escaped_value(value: JsonValue) -> JsonValue:
    if isinstance(value, str):
        return escaped(value)
    if isinstance(value, list):
        return [_escaped_value(v) for v in value]
    if isinstance(value, dict):
        return escaped_strings(value)
    return value
