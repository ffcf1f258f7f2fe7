"""Text from runs, models and tools printed as data: every control or bidi character
shown as its escape. A small module of its own: ``main`` wraps stdout and stderr in
``PrintableStream`` before anything else runs, ``--help`` included, and must not
pull the tables' imports (rich, the contracts) in to do it."""

from __future__ import annotations

from typing import TextIO

__all__ = ["PrintableStream", "printable"]

# Characters that would drive the reader's terminal or reorder what it shows: C0 and
# C1 controls (ESC starts a terminal command, CR overwrites a line) and the bidi
# controls (U+202E shows text backwards). Each is printed as its escape (\x1b, \u202e).
# Newline and tab stay: they only lay text out.
_BIDI = (0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A))
_UNPRINTABLE = {
    c: (f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}")
    for c in (*range(0x20), 0x7F, *range(0x80, 0xA0), *_BIDI)
    if c not in (0x0A, 0x09)
}


def printable(text: str) -> str:
    """``text`` as data: every control or bidi character shown as its escape."""
    return text.translate(_UNPRINTABLE)


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
