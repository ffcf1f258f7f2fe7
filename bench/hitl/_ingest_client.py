"""The ingest benchmark's load generator, a process of its own (``python -m
bench.hitl._ingest_client SPEC OUT``): ``clients`` threads, each on one kept-alive
``http.client`` connection (the lightest client the standard library has, so the
shim, not the generator, is what is measured), post the same intent body for
``seconds``. SPEC is a JSON file ``{host, port, headers, body, clients, seconds}``;
OUT gets ``{elapsed_s, cpu_s, latencies_ms, accepted, refused}``: ``accepted`` the
run ids of every 202, ``refused`` the status and code of every other answer,
``cpu_s`` this process's own CPU (user + system) over the whole load.
"""

from __future__ import annotations

import http.client
import json
import resource
import sys
import threading
import time
from pathlib import Path
from typing import Any


def _cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def main(argv: list[str]) -> int:
    spec: dict[str, Any] = json.loads(Path(argv[0]).read_text())
    body = json.dumps(spec["body"]).encode()
    headers = {**spec["headers"], "Content-Type": "application/json"}
    latencies: list[float] = []
    accepted: list[str] = []
    refused: list[str] = []
    lock = threading.Lock()
    deadline = time.monotonic() + float(spec["seconds"])

    def client() -> None:
        conn = http.client.HTTPConnection(spec["host"], int(spec["port"]), timeout=60)
        try:
            while time.monotonic() < deadline:
                began = time.perf_counter()
                conn.request("POST", "/intent", body=body, headers=headers)
                answer = conn.getresponse()
                data = answer.read()
                took = (time.perf_counter() - began) * 1000
                with lock:
                    if answer.status == 202:
                        latencies.append(took)
                        accepted.append(str(json.loads(data)["run_id"]))
                    else:
                        error = json.loads(data).get("error", {}) if data else {}
                        refused.append(f"{answer.status} {error.get('code', '?')}")
        finally:
            conn.close()

    cpu, began = _cpu_s(), time.monotonic()
    threads = [threading.Thread(target=client) for _ in range(int(spec["clients"]))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    out = {
        "elapsed_s": time.monotonic() - began,
        "cpu_s": _cpu_s() - cpu,
        "latencies_ms": latencies,
        "accepted": accepted,
        "refused": refused,
    }
    Path(argv[1]).write_text(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
