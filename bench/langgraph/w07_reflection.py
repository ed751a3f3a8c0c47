"""Workload 7 — Reflection (examples/07_reflection.ais).

seq: draft, log, read trace, reflect, verify, revise in turn; par: after the
draft, the reflect branch (read trace + reflect) and verify run together."""
from typing import TypedDict

from langgraph.graph import END, START, StateGraph

import common


class S(TypedDict, total=False):
    task: str
    source: str
    draft: str
    critique: dict
    verdict: dict
    result: str


def build(rt: common.Runtime, style: str, args: dict):
    def draft(s: S) -> S:
        d = rt.llm("think", f"Complete this task using only the source material provided: {s['task']}", s["source"])
        rt.umem(d, "episodic")
        return {"draft": d}

    def reflect(s: S) -> S:
        attempts = rt.qmem(f"drafts for: {s['task']}", "episodic")
        return {"critique": rt.llm("reflect", common.text_of(attempts))}

    def verify(s: S) -> S:
        return {"verdict": rt.llm("verify", s["draft"], s["source"])}

    def revise(s: S) -> S:
        r = rt.llm("ask", "Revise the draft so that it fixes every issue in the critique and removes every claim the verification marked as unsupported. Keep the parts the critique calls strong.",
                   s["draft"], s["critique"], s["verdict"])
        rt.umem(r, "episodic")
        return {"result": r}

    g = StateGraph(S)
    for f in (draft, reflect, verify, revise):
        g.add_node(f.__name__, f)
    g.add_edge(START, "draft")
    if style == "seq":
        g.add_edge("draft", "reflect")
        g.add_edge("reflect", "verify")
        g.add_edge("verify", "revise")
    else:
        g.add_edge("draft", "reflect")
        g.add_edge("draft", "verify")
        g.add_edge(["reflect", "verify"], "revise")
    g.add_edge("revise", END)
    return g.compile(), {"task": args["task"], "source": args["source"]}, 2


if __name__ == "__main__":
    common.run("7", build)
