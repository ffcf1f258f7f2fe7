"""``python -m bench.hitl._gh_proc worker|shim PORT``: a Gatehouse process, counted.

The real entry points (``worker.app.main``, ``uvicorn shim.api.asgi:app``) with the
SQL counters of ``_counting`` installed first; BENCH_COUNT_FILE names the file.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from bench.hitl import _counting


def main() -> None:
    _counting.install(Path(os.environ["BENCH_COUNT_FILE"]))
    if sys.argv[1] == "worker":
        # one process is a worker or a shim, never both: import only what it is
        from worker.app import main as worker_main  # noqa: PLC0415

        worker_main()
        return
    import uvicorn  # noqa: PLC0415 - the worker process has no use for it

    # BENCH_SHIM_PROCESSES above 1: that many shim processes on the port (uvicorn's
    # workers, as `gatehouse shim --processes`); they are started afresh, so the SQL
    # counters installed here do not count them.
    uvicorn.run(
        "shim.api.asgi:app",
        host="127.0.0.1",
        port=int(sys.argv[2]),
        log_level="warning",
        workers=int(os.environ.get("BENCH_SHIM_PROCESSES", "1")),
    )


if __name__ == "__main__":
    main()
