"""``python -m worker``: run one worker process until SIGTERM/SIGINT."""

from worker.app import main

main()
