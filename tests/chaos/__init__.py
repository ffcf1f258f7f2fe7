"""Chaos suite: real processes, a private PostgreSQL, kill -9 and database crashes.

``harness`` runs the shim and worker slots, ``client`` calls the shim and
counts every answer, ``faults`` breaks them,
``crashpoints`` holds the named crash cases and their exact outcomes, ``sink``
is the callee that records every effect, ``model`` says what the approved plans
should have produced, ``book`` keeps what was submitted and decided,
``resolver`` plays the operator for in-doubt calls, ``checker`` compares, and
``scenario`` runs the phases. ``report`` renders the figures into
docs/reliability.md.
"""
