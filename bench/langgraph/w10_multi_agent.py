"""Workload 10 — Multi-Agent coordination (examples/10_multi_agent.ais).

seq: the four investigations, then compose, one call after the other.
par: five branches from START (each agent's internal chain folded into one
node, so a short branch never waits at a superstep barrier behind a long
one; the Counsel's two questions are two nodes), joined, then
draft -> fact check -> revision."""
from typing import TypedDict

from langgraph.graph import END, START, StateGraph

import common


class S(TypedDict, total=False):
    topic: str
    technical: str
    market: str
    economics: str
    rules: str
    pending: str
    draft: str
    report: dict
    result: str


def build(rt: common.Runtime, style: str, args: dict):
    def investigate(topic: str, angle: str) -> str:
        hits = rt.tool("web_search", {"query": f"{topic} {angle}", "limit": 8})
        return rt.llm("ask", f"From these search results, summarize what is known about {topic} from the {angle} angle. Cite the result titles you rely on.", hits)

    def technical(s: S) -> S:
        return {"technical": investigate(s["topic"], "technical feasibility")}

    def market(s: S) -> S:
        return {"market": investigate(s["topic"], "market adoption")}

    def economics(s: S) -> S:
        t = s["topic"]
        drivers = rt.llm("think", f"Identify the three economic drivers that will most affect {t} over the next five years.")
        return {"economics": rt.llm("reason", f"Give a low, central and high five-year scenario for {t}, with the assumptions behind each.", drivers)}

    def rules(s: S) -> S:
        return {"rules": rt.llm("ask", f"Which existing regulations in the EU and the US apply to {s['topic']}?")}

    def pending(s: S) -> S:
        return {"pending": rt.llm("ask", f"Which pending legislation or court cases could change the legal position of {s['topic']}?")}

    def draft(s: S) -> S:
        notes = [s["technical"], s["market"], s["economics"], s["rules"] + "\n\n" + s["pending"]]
        return {"draft": rt.llm("ask", f"Write a 600-word briefing on {s['topic']} for a non-specialist executive, using only the notes provided.", notes)}

    def check(s: S) -> S:
        return {"report": rt.llm("verify", s["draft"], "Claims must be supported by the research notes the text was written from.")}

    def revise(s: S) -> S:
        return {"result": rt.llm("ask", "Revise the briefing so that every claim flagged by the fact check is removed or qualified.", s["draft"], s["report"])}

    g = StateGraph(S)
    branches = [technical, market, economics, rules, pending]
    for f in branches + [draft, check, revise]:
        g.add_node(f.__name__, f)
    if style == "seq":
        prev = START
        for f in branches:
            g.add_edge(prev, f.__name__)
            prev = f.__name__
        g.add_edge(prev, "draft")
    else:
        for f in branches:
            g.add_edge(START, f.__name__)
        g.add_edge([f.__name__ for f in branches], "draft")
    g.add_edge("draft", "check")
    g.add_edge("check", "revise")
    g.add_edge("revise", END)
    return g.compile(), {"topic": args["topic"]}, 5


if __name__ == "__main__":
    common.run("10", build)
