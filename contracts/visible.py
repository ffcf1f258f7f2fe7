"""Text as an approver must see it: nothing hidden, nothing reordered.

Plan inputs, objectives and titles come from planners and outside data. Control
characters, bidirectional overrides and isolates (which can make ``rm a; b``
display as something else), zero-width and invisible characters, and line or
paragraph separators are shown as ``\\uXXXX`` escapes, so what is displayed is
what will run. ``canonical`` renders a JSON value in full (sorted keys, every
argument, nothing cut) the same way everywhere: the dashboard and the CLI.
"""

from __future__ import annotations

import json
import re

from contracts._json import JsonValue, with_placeholders
from contracts.plan import PlanStep

__all__ = ["canonical", "shown_input", "visible"]

# C0 (but tab and newline) and C1 controls, DEL, soft hyphen, Arabic letter mark,
# Hangul fillers, Mongolian vowel separator, zero-width and directional marks,
# line/paragraph separators, bidi embeddings, overrides and isolates, word joiner
# and invisible operators, variation selectors, BOM, interlinear annotations.
_HIDDEN = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u00ad\u061c\u115f\u1160\u180e\u200b-\u200f"
    "\u2028-\u202e\u2060-\u206f\u3164\ufe00-\ufe0f\ufeff\uffa0\ufff9-\ufffb]"
)


def visible(text: str, *, one_line: bool = True) -> str:
    """``text`` with every hidden or reordering character escaped (and, for a
    one-line field, newlines and tabs too)."""
    shown = _HIDDEN.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
    if one_line:
        shown = shown.replace("\n", "\\n").replace("\t", "\\t")
    return shown


def canonical(value: JsonValue, *, indent: int | None = 2) -> str:
    """A JSON value in full, keys sorted, its strings' hidden characters escaped, a
    number JSON cannot carry shown as its placeholder."""
    shown, _ = with_placeholders(value)
    dumped = json.dumps(shown, ensure_ascii=False, sort_keys=True, indent=indent)
    return visible(dumped, one_line=False)


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
