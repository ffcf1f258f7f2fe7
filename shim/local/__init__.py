"""The local stack: Gatehouse's own processes on this machine, started and supervised.

``gatehouse up`` (the shim and N workers, a dead worker started again),
the demo's stack (a shim, a worker and an inventory service on a fresh SQLite
file), and the process helpers tests and benchmarks start stacks with. It
starts the shim and the workers as programs and never imports the API or the
CLI; the CLI's ``up``, ``demo`` and ``shim`` commands call it.

    _procs.py    start and stop the shim (served one way: shim_command) and workers
    _up.py       run_up: the supervisor; in_use: why a second stack must not start
    _demo.py     demo_stack: the demo's processes and its two people
    _fixture.py  InventoryService: a small HTTP service on loopback for the demo and tests
"""

from shim.local._demo import DemoStack, demo_stack
from shim.local._fixture import INVENTORY, InventoryService
from shim.local._procs import (
    ASGI_APP,
    HTTP_PROTOCOL,
    free_port,
    serve_shim,
    served_certificate,
    shim_command,
    shim_env,
    start_shim,
    start_worker,
    stop,
    wait_healthy,
    worker_env,
)
from shim.local._up import StackInUseError, in_use, run_up, stack_env

__all__ = [
    "ASGI_APP",
    "HTTP_PROTOCOL",
    "INVENTORY",
    "DemoStack",
    "InventoryService",
    "StackInUseError",
    "demo_stack",
    "free_port",
    "in_use",
    "run_up",
    "serve_shim",
    "served_certificate",
    "shim_command",
    "shim_env",
    "stack_env",
    "start_shim",
    "start_worker",
    "stop",
    "wait_healthy",
    "worker_env",
]
