"""Every ingress of Gatehouse: the HTTP API (``shim.api``), the CLI (``shim.cli``), the local
stack (``shim.local``) and the tokens they share (``shim.tokens``)."""

# The package's version, as pyproject.toml says (a test holds them equal): the
# CLI prints it without importlib.metadata, which the banned-API policy forbids.
__version__ = "0.1.0"
