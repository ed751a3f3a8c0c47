"""Workload 1 — Parallel Research (examples/01_parallel_research.ais)."""
from typing import TypedDict

from langgraph.graph import END, START, StateGraph

import common


class S(TypedDict, total=False):
    topic: str
    question: str
    findings: str
    objections: str
    impact: str
    result: str


def build(rt: common.Runtime, style: str, args: dict):
    def question(s: S) -> S:
        return {"question": rt.llm("ask", f"Rewrite this research topic as one precise question that names the scope and the time frame: {s['topic']}")}

    def research(s: S) -> S:
        return {"findings": rt.llm("ask", f"List the three most important findings of the last two years on this question, each with one supporting source: {s['question']}")}

    def critique(s: S) -> S:
        return {"objections": rt.llm("ask", f"Give the strongest objections, unresolved problems and known failure cases relevant to this question: {s['question']}")}

    def analyze(s: S) -> S:
        return {"impact": rt.llm("ask", f"Estimate the practical impact over the next five years for this question: who adopts it, at what cost, and what could stop it. Question: {s['question']}")}

    def synth(s: S) -> S:
        return {"result": rt.llm("ask", f"Write a balanced one-page report answering: {s['question']}. Use the findings, objections and impact assessment provided as context, and point out where they disagree.", s["findings"], s["objections"], s["impact"])}

    g = StateGraph(S)
    for f in (question, research, critique, analyze, synth):
        g.add_node(f.__name__, f)
    g.add_edge(START, "question")
    workers = ["research", "critique", "analyze"]
    if style == "seq":
        prev = "question"
        for w in workers:
            g.add_edge(prev, w)
            prev = w
        g.add_edge(prev, "synth")
    else:
        for w in workers:
            g.add_edge("question", w)
        g.add_edge(workers, "synth")
    g.add_edge("synth", END)
    return g.compile(), {"topic": args["topic"]}, 3


if __name__ == "__main__":
    common.run("1", build)
