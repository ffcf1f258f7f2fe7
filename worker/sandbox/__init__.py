"""The kernel sandbox shell steps run in (bubblewrap), and how to ask whether it works.

``find_sandbox`` probes once per setting and answers a ``Sandbox`` or the reason
there is none; ``Sandbox.run_prefix`` wraps a program. See ``bwrap.py``.
"""

from worker.sandbox.bwrap import (
    BWRAP_ENV,
    DEFAULT_LIMITS,
    Sandbox,
    SandboxLimits,
    find_sandbox,
    limits_for,
)

__all__ = ["BWRAP_ENV", "DEFAULT_LIMITS", "Sandbox", "SandboxLimits", "find_sandbox", "limits_for"]
