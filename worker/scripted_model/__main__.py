"""``gatehouse-model --script FILE [--port N]``: serve a model script until interrupted."""

from __future__ import annotations

import argparse
import sys
import threading
from pathlib import Path

from worker.scripted_model.script import ScriptError, load_script
from worker.scripted_model.server import ScriptedModel


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="gatehouse-model",
        description="An offline OpenAI-compatible model that plays back a script file.",
    )
    parser.add_argument("--script", type=Path, required=True, help="the script (JSON)")
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (0: any)")
    args = parser.parse_args(argv)
    try:
        script = load_script(args.script)
    except ScriptError as exc:
        sys.stderr.write(f"gatehouse-model: {exc}\n")
        return 2
    with ScriptedModel(script, args.port) as model:
        sys.stdout.write(f"scripted model listening on {model.base_url}\n")
        sys.stdout.flush()
        try:
            threading.Event().wait()
        except KeyboardInterrupt:
            return 0
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
