"""``python -m bench.hitl.peer_langgraph URL``: LangGraph + PostgresSaver as a peer.

compile → approve (``interrupt()``) → step1 → step2 → step3; each step inserts
one row. A run: invoke until the interrupt, then ``Command(resume=digest)``.
Variant ``async`` is LangGraph's default durability (a checkpoint is written
while the next node runs); ``sync`` writes each before the next node starts.

``phases`` (asked after a sequential pass) is where its runs' time went, on this
process's clock: submit (the first ``invoke``) → plan card (that ``invoke``
returning the interrupt), and approval (the resuming ``invoke``) → the first
step's node starting.
"""

from __future__ import annotations

import hashlib
import json
import sys
import time
import uuid
from typing import Any, Literal, TypedDict

from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt
from psycopg.rows import dict_row
from psycopg_pool import ConnectionPool

from bench.hitl._peer import serve
from bench.hitl.steps import APPROVAL_TO_STEP, SUBMIT_TO_CARD

STEPS = ["s1", "s2", "s3"]


class State(TypedDict, total=False):
    run_id: str
    plan: list[str]
    digest: str
    done: list[str]


class LangGraphSystem:
    def __init__(self, url: str) -> None:
        self.pool: ConnectionPool[Any] = ConnectionPool(
            url,
            min_size=4,
            max_size=20,
            kwargs={"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row},
            open=True,
        )
        with self.pool.connection() as conn:
            conn.execute("CREATE TABLE IF NOT EXISTS bench_rows (run_id TEXT, step TEXT)")
        saver = PostgresSaver(self.pool)
        saver.setup()
        graph = StateGraph(State)
        graph.add_node("compile", self._compile)
        graph.add_node("approve", self._approve)
        previous = "approve"
        graph.add_edge(START, "compile")
        graph.add_edge("compile", "approve")
        for step in STEPS:
            graph.add_node(step, self._step(step))
            graph.add_edge(previous, step)
            previous = step
        graph.add_edge(previous, END)
        self.app = graph.compile(checkpointer=saver)
        # per run: its variant, and epoch ms at submit, card, approval, first step's start
        self._times: dict[str, tuple[str, dict[str, float]]] = {}

    @staticmethod
    def _compile(state: State) -> State:
        digest = hashlib.sha256(json.dumps(STEPS).encode()).hexdigest()
        return {"plan": list(STEPS), "digest": digest}

    @staticmethod
    def _approve(state: State) -> State:
        answer = interrupt({"plan": state["plan"], "digest": state["digest"]})
        if answer != state["digest"]:
            raise RuntimeError("approval names another plan")
        return {"done": []}

    def _step(self, step: str) -> Any:
        def node(state: State) -> State:
            if step == STEPS[0] and state["run_id"] in self._times:
                self._times[state["run_id"]][1].setdefault("step", time.time() * 1000)
            with self.pool.connection() as conn:
                conn.execute(
                    "INSERT INTO bench_rows (run_id, step) VALUES (%s, %s)", (state["run_id"], step)
                )
            return {"done": [*state.get("done", []), step]}

        return node

    def one_run(self, variant: str) -> None:
        durability: Literal["sync", "async"] = "sync" if variant == "sync" else "async"
        run_id = uuid.uuid4().hex
        config: Any = {"configurable": {"thread_id": run_id}}
        times = {"submit": time.time() * 1000}
        self._times[run_id] = (variant, times)
        first = self.app.invoke({"run_id": run_id}, config, durability=durability)
        card = first["__interrupt__"][0].value
        times["card"] = times["approve"] = time.time() * 1000
        final = self.app.invoke(Command(resume=card["digest"]), config, durability=durability)
        if final.get("done") != STEPS:
            raise RuntimeError(f"langgraph run ended with {final}")

    def phases(self, variant: str, since_ms: float) -> dict[str, list[float]]:
        """Ms of each phase of this variant's runs submitted from ``since_ms`` on."""
        out: dict[str, list[float]] = {SUBMIT_TO_CARD: [], APPROVAL_TO_STEP: []}
        for ran, t in self._times.values():
            if ran == variant and t["submit"] >= since_ms and "step" in t:
                out[SUBMIT_TO_CARD].append(t["card"] - t["submit"])
                out[APPROVAL_TO_STEP].append(t["step"] - t["approve"])
        return out

    def counts(self) -> dict[str, int]:
        return {}

    def close(self) -> None:
        self.pool.close()


if __name__ == "__main__":
    serve(LangGraphSystem(sys.argv[1]))
