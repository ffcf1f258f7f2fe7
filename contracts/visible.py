"""Text as an approver must see it: nothing hidden, nothing reordered.

Plan inputs, objectives and titles come from planners and outside data. Control
characters, bidirectional overrides and isolates (which can make ``rm a; b``
display as something else), zero-width and invisible characters, line and
paragraph separators, tags, variation selectors and every other character the
one allowlist refuses (``contracts._text``) are shown as escapes (``\\uXXXX``),
so what is displayed is what will run. ``canonical`` renders a JSON value in full
(sorted keys, every argument, nothing cut) the same way everywhere: the dashboard
and the CLI.
"""

from __future__ import annotations

import json

from contracts._json import JsonValue, with_placeholders
from contracts._text import escaped
from contracts.plan import PlanStep

__all__ = ["canonical", "shown_input", "visible"]


def visible(text: str, *, one_line: bool = True) -> str:
    """``text`` with every hidden or reordering character escaped (and, for a
    one-line field, newlines and tabs too). What is hidden is decided by the one
    allowlist of ``contracts._text``."""
    shown = escaped(text)
    if one_line:
        shown = shown.replace("\n", "\\n").replace("\t", "\\t")
    return shown


def canonical(value: JsonValue, *, indent: int | None = 2) -> str:
    """A JSON value in full, keys sorted, its strings' hidden characters escaped, a
    number JSON cannot carry shown as its placeholder."""
    shown, _ = with_placeholders(value)
    dumped = json.dumps(shown, ensure_ascii=False, sort_keys=True, indent=indent)
    # JSON's own spelling of an escape: the text shown still parses to ``value``.
    return escaped(dumped, spelling="json")


def shown_input(step: PlanStep, outside: bool, *, indent: int | None = 2) -> str:
    """A step's input as the approver sees it: the fixed part in full, and where a
    value from an earlier step goes. ``outside`` marks that value as outside data
    (tainted): nobody approves it, it is only placed where data may go."""
    fixed = canonical(step.input, indent=indent) if step.input is not None else ""
    source = step.input_from
    if source is None:
        return fixed
    kind = "OUTSIDE DATA (tainted)" if outside else "value from an earlier step"
    taken = f"{source.step_id}{visible(source.pointer)}"
    goes = visible(source.into) if source.into is not None else "the whole input"
    return f"{fixed}\n[{kind}: output of {taken} fills {goes}]".lstrip("\n")
