"""A run from an OPA archive, on the worker: the archive into the workspace, the output out.

``unpack`` puts the accepted archive, byte for byte the one the shim checked,
into the run's workspace before its first step; ``pack_output`` packs what the
run wrote under ``output/``, with the session history brought up to date, into
the run's output archive when the run ends. The format is ``opa_format``'s.
"""

from worker.opa.pack import pack_output
from worker.opa.unpack import unpack

__all__ = ["pack_output", "unpack"]
