"""LangGraph equivalents of issue 36's prompt-caching workloads
(bench/server/cache/*.ais), written as a LangGraph user would: each call
gets the shared document as context after its prompt (the framing of
bench/langgraph/common.py, the same as ours without `cache-layout`).

  lg_cache.py WORKLOAD --base-url URL --args JSON   (WORKLOAD: w01, w09, w10)

Prints one JSON line (bench/langgraph/common.py's `run`).
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "langgraph"))

from typing import TypedDict  # noqa: E402

from langgraph.graph import END, START, StateGraph  # noqa: E402

import common  # noqa: E402


class S(TypedDict, total=False):
    topic: str
    task: str
    ticket: str
    doc: str
    question: str
    findings: str
    objections: str
    impact: str
    draft: str
    legal: str
    money: str
    dates: str
    edited: str
    category: str
    result: str


def w01(rt, style, args):
    def question(s):
        return {"question": rt.llm("ask", f"Rewrite this research topic as one precise question that the document can answer: {s['topic']}", s["doc"])}

    def research(s):
        return {"findings": rt.llm("ask", f"List the three most important findings on this question, each with one supporting passage from the document: {s['question']}", s["doc"])}

    def critique(s):
        return {"objections": rt.llm("ask", f"Give the strongest objections, unresolved problems and known failure cases the document raises for this question: {s['question']}", s["doc"])}

    def analyze(s):
        return {"impact": rt.llm("ask", f"Estimate the practical impact over the next five years for this question, using the document: {s['question']}", s["doc"])}

    def synth(s):
        return {"result": rt.llm("ask", f"Write a balanced one-page report answering: {s['question']}. Use the findings, objections and impact assessment and the document.", s["doc"], s["findings"], s["objections"], s["impact"])}

    g = StateGraph(S)
    for f in (question, research, critique, analyze, synth):
        g.add_node(f.__name__, f)
    g.add_edge(START, "question")
    for w in ("research", "critique", "analyze"):
        g.add_edge("question", w)
    g.add_edge(["research", "critique", "analyze"], "synth")
    g.add_edge("synth", END)
    return g.compile(), {"topic": args["topic"], "doc": args["doc"]}, 3


def w09(rt, style, args):
    def classify(s):
        return {"category": rt.llm("ask", f"Classify this support ticket using the manual. Reply with one word: billing, technical or other. Ticket: {s['ticket']}", s["doc"]).strip().lower()}

    def billing(s):
        return {"result": rt.llm("ask", f"Explain the charge and the refund options the manual gives for this ticket: {s['ticket']}", s["doc"])}

    def technical(s):
        return {"result": rt.llm("ask", f"Give step-by-step troubleshooting from the manual for this ticket: {s['ticket']}", s["doc"])}

    def other(s):
        return {"result": rt.llm("ask", f"Write a polite reply citing the manual's escalation policy for this ticket: {s['ticket']}", s["doc"])}

    g = StateGraph(S)
    for f in (classify, billing, technical, other):
        g.add_node(f.__name__, f)
    g.add_edge(START, "classify")
    g.add_conditional_edges("classify", lambda s: s["category"] if s["category"] in ("billing", "technical") else "other",
                            {"billing": "billing", "technical": "technical", "other": "other"})
    for f in ("billing", "technical", "other"):
        g.add_edge(f, END)
    return g.compile(), {"ticket": args["ticket"], "doc": args["manual"]}, 1


def w10(rt, style, args):
    def draft(s):
        return {"draft": rt.llm("ask", f"Draft a summary of the contract for this task: {s['task']}", s["doc"])}

    def legal(s):
        return {"legal": rt.llm("ask", f"Review this draft for legal risks against the contract: {s['draft']}", s["doc"])}

    def money(s):
        return {"money": rt.llm("ask", f"Review this draft for financial obligations against the contract: {s['draft']}", s["doc"])}

    def dates(s):
        return {"dates": rt.llm("ask", f"Review this draft for deadlines and notice periods against the contract: {s['draft']}", s["doc"])}

    def edit(s):
        return {"edited": rt.llm("ask", "Revise the draft using the three reviews.", s["doc"], s["draft"], s["legal"], s["money"], s["dates"])}

    def check(s):
        return {"result": rt.llm("ask", f"Check the revised summary against the contract and list any remaining errors: {s['edited']}", s["doc"])}

    g = StateGraph(S)
    for f in (draft, legal, money, dates, edit, check):
        g.add_node(f.__name__, f)
    g.add_edge(START, "draft")
    for w in ("legal", "money", "dates"):
        g.add_edge("draft", w)
    g.add_edge(["legal", "money", "dates"], "edit")
    g.add_edge("edit", "check")
    g.add_edge("check", END)
    return g.compile(), {"task": args["task"], "doc": args["doc"]}, 3


if __name__ == "__main__":
    name = sys.argv.pop(1)
    common.run(name, {"w01": w01, "w09": w09, "w10": w10}[name])
