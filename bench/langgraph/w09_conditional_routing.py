"""Workload 9 — Conditional Routing (examples/09_conditional_routing.ais).

A conditional edge runs only the selected specialist, as the AIS `switch`
does, so both styles are the same graph (nothing can run in parallel)."""
from typing import TypedDict

from langgraph.graph import END, START, StateGraph

import common


class S(TypedDict, total=False):
    ticket: str
    category: str
    result: str


def build(rt: common.Runtime, style: str, args: dict):
    def classify(s: S) -> S:
        return {"category": rt.llm("ask", "Classify this support ticket. Reply with exactly one lowercase word: billing, technical, account or other.", s["ticket"])}

    def billing(s: S) -> S:
        return {"result": rt.llm("ask", "You are a billing specialist. Explain the charge in question and the refund options, if any.", s["ticket"])}

    def technical(s: S) -> S:
        diagnosis = rt.llm("think", "Diagnose the most likely root cause of the problem described in this ticket.", s["ticket"])
        return {"result": rt.llm("ask", "Write numbered troubleshooting steps for the customer, based on this diagnosis.", diagnosis)}

    def account(s: S) -> S:
        return {"result": rt.llm("ask", "You are an account specialist. Explain how the customer can recover or change their account, step by step.", s["ticket"])}

    def other(s: S) -> S:
        return {"result": rt.llm("ask", "Write a polite reply that acknowledges the ticket and says a human agent will follow up within one business day.", s["ticket"])}

    g = StateGraph(S)
    for f in (classify, billing, technical, account, other):
        g.add_node(f.__name__, f)
    g.add_edge(START, "classify")
    routes = ["billing", "technical", "account"]
    g.add_conditional_edges("classify", lambda s: s["category"] if s["category"] in routes else "other", routes + ["other"])
    for r in routes + ["other"]:
        g.add_edge(r, END)
    return g.compile(), {"ticket": args["ticket"]}, 1


if __name__ == "__main__":
    common.run("9", build)
