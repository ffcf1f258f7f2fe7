"""The explain skill: a model writes a ``human_ui`` report from a finished run's evidence.

* ``_request`` — the evidence a report is written from, the prompt, and the
  check every report gets;
* ``_model`` — the one model call, as a chat-completions request;
* ``_skill`` — the call through the op_key ledger (``@explain``), its episode,
  and a replay of it from the ledger alone.

The report never feeds a plan: nothing in the planners, the gate or the flow
reads it (``tests/static/test_explain_isolation.py``). The ``gatehouse.explain``
workflow that lets the shim ask for one is in ``worker.durable``.
"""

from worker.explain._model import EXPLAIN_MAX_TOKENS, explain_request_body, explain_with_model
from worker.explain._request import (
    EXPLAIN_EPISODE_TYPE,
    EXPLAIN_INSTRUCTION,
    EXPLAIN_STEP_ID,
    OUTPUT_EXCERPT_CHARS,
    TEXT_CAP_CHARS,
    check_report,
    explain_prompt,
    explain_seed,
    run_evidence,
)
from worker.explain._skill import ExplainAsk, explain_run, prepare_explain, replay_explain

__all__ = [
    "EXPLAIN_EPISODE_TYPE",
    "EXPLAIN_INSTRUCTION",
    "EXPLAIN_MAX_TOKENS",
    "EXPLAIN_STEP_ID",
    "OUTPUT_EXCERPT_CHARS",
    "TEXT_CAP_CHARS",
    "ExplainAsk",
    "check_report",
    "explain_prompt",
    "explain_request_body",
    "explain_run",
    "explain_seed",
    "explain_with_model",
    "prepare_explain",
    "replay_explain",
    "run_evidence",
]
