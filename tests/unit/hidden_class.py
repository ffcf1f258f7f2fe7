"""The class of characters that must not reach a person as they are, built from
``unicodedata`` and the Unicode Character Database's list of default-ignorable code
points, not from the code under test: every code point whose general category is
Cc, Cf, Cs, Co, Cn, Zl or Zp, and every default-ignorable one. Shared by the
allowlist's sweep (``tests/unit/contracts/test_shown_as_is.py``) and the surfaces'
test (``tests/unit/test_hidden_characters_on_every_surface.py``)."""

from __future__ import annotations

import unicodedata

__all__ = ["CLASS", "LAYOUT", "SAMPLE", "in_class", "raw"]

_REFUSED_CATEGORIES = {"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"}
# Default_Ignorable_Code_Point (DerivedCoreProperties.txt, Unicode 15.1), as listed there.
_DEFAULT_IGNORABLE = [
    (0x00AD, 0x00AD), (0x034F, 0x034F), (0x061C, 0x061C), (0x115F, 0x1160),
    (0x17B4, 0x17B5), (0x180B, 0x180D), (0x180E, 0x180E), (0x180F, 0x180F),
    (0x200B, 0x200F), (0x202A, 0x202E), (0x2060, 0x2064), (0x2065, 0x2065),
    (0x2066, 0x206F), (0x3164, 0x3164), (0xFE00, 0xFE0F), (0xFEFF, 0xFEFF),
    (0xFFA0, 0xFFA0), (0xFFF0, 0xFFF8), (0x1BCA0, 0x1BCA3), (0x1D173, 0x1D17A),
    (0xE0000, 0xE0000), (0xE0001, 0xE0001), (0xE0002, 0xE001F), (0xE0020, 0xE007F),
    (0xE0080, 0xE00FF), (0xE0100, 0xE01EF), (0xE01F0, 0xE0FFF),
]  # fmt: skip
# Newline and tab lay text out; the surfaces keep them as they always have.
LAYOUT = {0x0A, 0x09}


def _member(code: int) -> bool:
    if unicodedata.category(chr(code)) in _REFUSED_CATEGORIES:
        return True
    return any(low <= code <= high for low, high in _DEFAULT_IGNORABLE)


# One flag a code point, 0 to U+10FFFF: built once, read by every test here.
CLASS = bytes(_member(code) for code in range(0x110000))


def in_class(code: int) -> bool:
    return bool(CLASS[code])


def _sample() -> list[int]:
    """Every assigned member of the class, and every 509th of the unassigned,
    private-use and surrogate ones with the first and last of each run of them."""
    picked: list[int] = []
    sparse = 0
    previous_sparse = False
    for code in range(0x110000):
        if not CLASS[code]:
            if previous_sparse:
                picked.append(code - 1)  # the last of a run
            previous_sparse = False
            continue
        if unicodedata.category(chr(code)) not in {"Cn", "Co", "Cs"}:
            picked.append(code)
            previous_sparse = False
            continue
        if not previous_sparse or sparse % 509 == 0:
            picked.append(code)
        sparse += 1
        previous_sparse = True
    if previous_sparse:
        picked.append(0x10FFFF)
    reported = [0xE0030, 0x034F, 0xE0100, 0x1D173, 0x17B4, 0x17B5, 0x200D, 0xFE0F]
    return sorted({*picked, *reported} - LAYOUT)


SAMPLE = _sample()


def raw(out: str) -> list[str]:
    """The characters of the class that reached ``out`` as they are."""
    found = {ch for ch in out if ord(ch) not in LAYOUT}
    return sorted(f"U+{ord(ch):04X}" for ch in found if in_class(ord(ch)))
