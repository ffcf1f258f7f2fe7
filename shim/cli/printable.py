"""Text from runs, models and tools printed as data: every character that is not
plainly printable shown as its escape. A small module of its own: ``main`` wraps
stdout and stderr in ``PrintableStream`` before anything else runs, ``--help``
included, and must not pull the tables' imports (rich, the contracts) in to do it."""

from __future__ import annotations

import unicodedata
from typing import TextIO

__all__ = ["PrintableStream", "printable", "surely_printable"]


def surely_printable(char: str) -> bool:
    """Whether ``char`` is shown as it is without asking the contracts: printable
    (``str.isprintable``: no control, format, private-use, unassigned or separator
    character) and neither a mark nor an other-letter, the two categories where
    printable characters that draw nothing (variation selectors, fillers) live.
    Only a short cut: ``contracts.is_shown_as_is`` is the allowlist, and a test
    holds this to a part of it, over every code point."""
    return char in "\n\t" or (char.isprintable() and unicodedata.category(char) not in ("Mn", "Lo"))


def printable(text: str) -> str:
    """``text`` as data: every character the allowlist of ``contracts.escaped``
    refuses shown as its escape (\\x1b, \\u202e, \\U000e0030); newline and tab
    stay, they only lay text out."""
    if all(map(surely_printable, text)):
        return text
    # Text a run, a model or a tool wrote: the command that shows it has the
    # contracts loaded already.
    from contracts import escaped  # noqa: PLC0415 - kept off the path of --help

    return escaped(text, spelling="repr")


class PrintableStream:
    """A text stream that writes ``printable`` text: what the CLI writes to stdout and
    stderr passes through one (rich's own styling goes to ``raw``, its text having
    been made printable before layout)."""

    def __init__(self, raw: TextIO) -> None:
        self.raw = raw

    def write(self, text: str) -> int:
        self.raw.write(printable(text))
        return len(text)

    def flush(self) -> None:
        self.raw.flush()

    def fileno(self) -> int:
        return self.raw.fileno()

    def isatty(self) -> bool:
        return self.raw.isatty()

    def __getattr__(self, name: str) -> object:
        return getattr(self.raw, name)
