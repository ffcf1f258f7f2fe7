"""Write the JSON Schemas of every envelope into ``contracts/schemas/``.

Run ``python -m contracts.export`` after changing a model.
"""

from __future__ import annotations

import json
from pathlib import Path

from contracts._schemas import SCHEMA_MODELS, render_schema


def main() -> None:
    folder = Path(__file__).parent / "schemas"
    for name in SCHEMA_MODELS:
        text = json.dumps(render_schema(name), indent=2, sort_keys=True) + "\n"
        (folder / f"{name}.schema.json").write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
