"""Workload 2 — Chain Fusion (examples/02_chain_fusion.ais).

There is nothing to run in parallel: both styles are the same five-node
chain (LangGraph has no pass that could fuse the calls)."""
from typing import TypedDict

from langgraph.graph import END, START, StateGraph

import common


class S(TypedDict, total=False):
    product: str
    features: str
    benefits: str
    objections: str
    answers: str
    result: str


def build(rt: common.Runtime, style: str, args: dict):
    def features(s: S) -> S:
        return {"features": rt.llm("ask", f"List the five features of {s['product']} that matter most to a first-time buyer.")}

    def benefits(s: S) -> S:
        return {"benefits": rt.llm("ask", "For each feature, state the concrete benefit to the buyer in one sentence.", s["features"])}

    def objections(s: S) -> S:
        return {"objections": rt.llm("ask", "For each benefit, name the most likely objection a skeptical buyer would raise.", s["benefits"])}

    def answers(s: S) -> S:
        return {"answers": rt.llm("ask", "Answer each objection honestly in at most two sentences, without marketing language.", s["objections"])}

    def description(s: S) -> S:
        return {"result": rt.llm("ask", f"Turn these objection and answer pairs into a 150-word product description for {s['product']}.", s["answers"])}

    g = StateGraph(S)
    prev = START
    for f in (features, benefits, objections, answers, description):
        g.add_node(f.__name__, f)
        g.add_edge(prev, f.__name__)
        prev = f.__name__
    g.add_edge(prev, END)
    return g.compile(), {"product": args["product"]}, 1


if __name__ == "__main__":
    common.run("2", build)
