"""The kernel sandbox shell steps and the OpenCode server run in (bubblewrap), and
how to ask whether it works.

``find_sandbox`` probes once per setting and answers a ``Sandbox`` or the reason
there is none; ``Sandbox.run_prefix`` wraps a program. See ``bwrap.py``. The
OpenCode server's own layout and its network bridge are in ``server.py``
(``bridge.py`` runs inside the sandbox, ``relay.py`` outside).
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
