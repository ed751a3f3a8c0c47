"""Workload 5 — Memory Augmented (examples/05_memory_augmented.ais).

Memory is plain Python lists per tier (the AIS side uses the VM's in-memory
host). seq: every step in turn; par: the three tier reads fan out."""
from typing import TypedDict

from langgraph.graph import END, START, StateGraph

import common


class S(TypedDict, total=False):
    user: str
    question: str
    session_context: list
    known_facts: list
    past_answers: list
    result: str


def build(rt: common.Runtime, style: str, args: dict):
    def record(s: S) -> S:
        rt.umem(s["question"], "stm")
        rt.umem(f"{s['user']} asked: {s['question']}", "episodic")
        return {}

    def read_stm(s: S) -> S:
        return {"session_context": rt.qmem(s["question"], "stm")}

    def read_ltm(s: S) -> S:
        return {"known_facts": rt.qmem(s["question"], "ltm")}

    def read_episodic(s: S) -> S:
        return {"past_answers": rt.qmem(f"answers previously given to {s['user']}", "episodic")}

    def answer(s: S) -> S:
        a = rt.llm("ask", f"Answer the question from {s['user']}: {s['question']}. Prefer the stored facts, stay consistent with earlier answers, and keep it under 200 words.",
                   s["session_context"], s["known_facts"], s["past_answers"])
        return {"result": a}

    def persist(s: S) -> S:
        rt.umem(s["result"], "ltm")
        rt.umem(f"answered {s['user']}: {s['result']}", "episodic")
        return {}

    g = StateGraph(S)
    for f in (record, read_stm, read_ltm, read_episodic, answer, persist):
        g.add_node(f.__name__, f)
    reads = ["read_stm", "read_ltm", "read_episodic"]
    g.add_edge(START, "record")
    if style == "seq":
        g.add_edge("record", "read_stm")
        g.add_edge("read_stm", "read_ltm")
        g.add_edge("read_ltm", "read_episodic")
        g.add_edge("read_episodic", "answer")
    else:
        for r in reads:
            g.add_edge("record", r)
        g.add_edge(reads, "answer")
    g.add_edge("answer", "persist")
    g.add_edge("persist", END)
    return g.compile(), {"user": args["user"], "question": args["question"]}, 3


if __name__ == "__main__":
    common.run("5", build)
