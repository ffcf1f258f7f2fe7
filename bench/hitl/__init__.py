"""Side-by-side human-in-the-loop benchmark (issue 13, phase 1: measure only).

The same job three ways, on one PostgreSQL server, each in its own database:
compile a three-step plan, stop for an approval, get it at once, run three steps.

* ``gatehouse.py`` — Gatehouse as deployed: the shim (uvicorn) and one worker as
  separate processes (``_gh_proc.py`` wraps them to count SQL), driven over HTTP;
  also on SQLite.
* ``peer_langgraph.py`` — LangGraph with ``PostgresSaver``: ``interrupt()`` for the
  approval, ``Command(resume=...)``, three nodes each inserting a row.
* ``peer_dbos.py`` — bare DBOS Transact: a workflow with a compile step,
  ``DBOS.recv`` for the approval, three steps each inserting a row.

The peers run in child processes (``_peer.py``: JSON lines over a pipe), so
DBOS's one-per-process singleton and the GIL are theirs alone. ``run.py``
interleaves the rounds and ``report.py`` writes the section of
docs/benchmarks.md. Peers are benchmark-only (``pip install -e '.[bench]'``);
the product never imports them (tests/static/test_bench_peers.py).
"""
