"""JAR manifests (``META-INF/MANIFEST.MF``) and signature files (``.SF``): parse and write.

The JAR rules, strictly: UTF-8; lines end in CRLF, LF or CR; no line is longer
than 72 bytes; a line starting with one space continues the previous one;
headers are ``Name: Value`` with a name of letters, digits, ``-`` and ``_``;
sections are separated by blank lines, the first is the main section and every
other starts with ``Name:``; no attribute twice in a section. Parsing keeps
each section's raw bytes, which is what a ``.SF`` digests.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import NoReturn

from contracts import ErrorCode
from opa_format._refuse import refuse

__all__ = ["MAX_LINE", "JarSection", "parse_jar", "write_jar"]

MAX_LINE = 72
_HEADER = re.compile(r"([A-Za-z0-9][A-Za-z0-9_-]{0,69}): (.*)", re.DOTALL)
_NEWLINE = re.compile(rb"\r\n|\r|\n")


@dataclass(frozen=True)
class JarSection:
    attributes: dict[str, str]  # in file order
    raw: bytes  # the section's bytes including its terminating blank line, if any

    @property
    def name(self) -> str | None:
        return self.attributes.get("Name")


def _bad(code: ErrorCode, what: str, message: str) -> NoReturn:
    refuse(code, f"{what}: {message}")


def parse_jar(
    data: bytes, what: str, code: ErrorCode, *, named_sections: bool = True
) -> list[JarSection]:
    """The sections of a manifest-format file; refused with ``code`` when malformed.

    ``named_sections=False`` lets sections after the main one go without ``Name:``
    (opa-archive 0.1.0 writes its ``.SF`` so).
    """
    if b"\x00" in data:
        _bad(code, what, "contains a NUL byte")
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        _bad(code, what, "is not UTF-8")
    if not data:
        _bad(code, what, "is empty")
    if not data.endswith((b"\n", b"\r")):
        # Java ignores a last line without a newline: what it signs would differ from ours.
        _bad(code, what, "does not end with a newline")
    lines: list[tuple[bytes, int, int]] = []  # (content, start, end incl. newline)
    at = 0
    for m in _NEWLINE.finditer(data):
        lines.append((data[at : m.start()], at, m.end()))
        at = m.end()
    sections: list[JarSection] = []
    current: list[tuple[str, str]] = []
    section_start = 0
    for number, (content, start, end) in enumerate(lines, start=1):
        if len(content) > MAX_LINE:
            _bad(code, what, f"line {number} is {len(content)} bytes (at most {MAX_LINE})")
        if not content:
            if current:
                sections.append(_section(current, data[section_start:end], code, what))
                current = []
            elif sections or number == 1:
                # A blank line with no section before it (JAR allows only one between).
                _bad(code, what, f"line {number}: empty section")
            section_start = end
            continue
        text = content.decode("utf-8")
        if text.startswith(" "):
            if not current:
                _bad(code, what, f"line {number}: continuation line with nothing to continue")
            key, value = current[-1]
            current[-1] = (key, value + text[1:])
            continue
        if not current:
            section_start = start
        current.append((text, ""))
    if current:
        sections.append(_section(current, data[section_start:], code, what))
    if not sections:
        _bad(code, what, "has no main section")
    for index, section in enumerate(sections):
        if named_sections and index > 0 and section.name is None:
            _bad(code, what, f"section {index + 1} does not start with Name:")
    return sections


def _section(pending: list[tuple[str, str]], raw: bytes, code: ErrorCode, what: str) -> JarSection:
    attributes: dict[str, str] = {}
    for index, (head, rest) in enumerate(pending):
        m = _HEADER.fullmatch(head + rest)
        if m is None:
            _bad(code, what, f"not a 'Name: Value' header: {(head + rest)[:60]!r}")
        key, value = m.group(1), m.group(2)
        if key in attributes or key.lower() in {k.lower() for k in attributes}:
            _bad(code, what, f"attribute {key!r} appears twice in one section")
        if index == 0 and key.lower() == "name" and key != "Name":
            _bad(code, what, f"{key!r} must be spelled Name")
        attributes[key] = value
    return JarSection(attributes, raw)


def _wrap(line: str) -> bytes:
    # Split at byte boundaries that do not cut a UTF-8 character in two.
    encoded = line.encode("utf-8")
    out: list[bytes] = []
    budget = MAX_LINE
    while len(encoded) > budget:
        cut = budget
        while cut > 0 and (encoded[cut] & 0xC0) == 0x80:
            cut -= 1
        out.append(encoded[:cut])
        encoded = encoded[cut:]
        budget = MAX_LINE - 1
    out.append(encoded)
    return b"\r\n ".join(out) + b"\r\n"


def write_jar(sections: list[dict[str, str]]) -> tuple[bytes, list[bytes]]:
    """Serialize sections (the first is main); returns the file and each section's bytes."""
    bodies = [b"".join(_wrap(f"{k}: {v}") for k, v in s.items()) for s in sections]
    # Like Java's jar: with more than one section, each ends with a blank line.
    raws = [body + b"\r\n" for body in bodies] if len(bodies) > 1 else bodies
    return b"".join(raws), raws
