"""``python -m bench.hitl``: see bench/hitl/run.py."""

import sys

from bench.hitl.run import main

sys.exit(main())
