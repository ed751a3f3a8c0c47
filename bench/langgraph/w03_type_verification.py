"""Workload 3 — Type Verification (tests/type-verification/*.ais).

The five erroneous AIS programs, written the way a LangGraph user would.
Python finds the mistakes only while the graph runs (after the LLM calls
that precede them), or not at all. For each case the line reports whether
an exception surfaced, after how long (graph.invoke wall time) and how many
LLM calls had been paid for by then."""
import json
import sys
import time
from typing import TypedDict

from langgraph.graph import END, START, StateGraph

import common


class S(TypedDict, total=False):
    topic: str
    project: str
    meeting: str
    brief: str
    city: str
    findings: str
    critic_notes: str
    hours: float
    cost: float
    minutes: str
    stored: object
    draft: str
    feedback: str
    forecast: dict
    result: str


def chain(*nodes):
    g = StateGraph(S)
    prev = START
    for f in nodes:
        g.add_node(f.__name__, f)
        g.add_edge(prev, f.__name__)
        prev = f.__name__
    g.add_edge(prev, END)
    return g.compile()


def case1(rt):  # undefined variable: `critique` was bound as `critic_notes`
    def research(s: S) -> S:
        return {"findings": rt.llm("ask", f"Summarize the current evidence on {s['topic']} in five bullet points.")}

    def critic(s: S) -> S:
        return {"critic_notes": rt.llm("ask", f"List the main weaknesses in the evidence on {s['topic']}.")}

    def synth(s: S) -> S:
        return {"result": rt.llm("ask", f"Write a balanced summary of {s['topic']}.", s["findings"], s["critique"])}

    return chain(research, critic, synth), {"topic": "solid-state batteries"}


def case2(rt):  # type mismatch: the estimate is text, used as a number
    def estimate(s: S) -> S:
        return {"hours": float(rt.llm("ask", f"Estimate the engineering hours needed for: {s['project']}. Reply with a number only."))}

    def cost(s: S) -> S:
        return {"cost": rt.tool("calculator", {"expression": f"{s['hours']} * 95"})}

    def note(s: S) -> S:
        return {"result": rt.llm("ask", f"Write a one-paragraph budget note for {s['project']} costing {s['cost']} EUR.")}

    return chain(estimate, cost, note), {"project": "a mobile banking app"}


def case3(rt):  # use of a void value: the memory write returns None
    def minutes(s: S) -> S:
        return {"minutes": rt.llm("ask", "Write concise minutes for this meeting transcript, listing decisions and owners.", s["meeting"])}

    def store(s: S) -> S:
        return {"stored": rt.umem(s["minutes"], "ltm")}

    def email(s: S) -> S:
        return {"result": rt.llm("ask", "Draft a follow-up email to all attendees summarizing the minutes.", s["stored"])}

    return chain(minutes, store, email), {"meeting": "Weekly sync: ship v2 on Friday (Ana), fix login bug (Raj)."}


class Reviewer:
    def __init__(self, rt):
        self.rt = rt

    def review(self, draft: str) -> str:
        return self.rt.llm("ask", "Review this draft for factual errors and unclear wording; list each issue with a fix.", draft)


def case4(rt):  # call to a flow that does not exist
    reviewer = Reviewer(rt)

    def write(s: S) -> S:
        return {"draft": rt.llm("ask", "Write a 300-word article from this brief.", s["brief"])}

    def feedback(s: S) -> S:
        return {"feedback": reviewer.critique(s["draft"])}

    def revise(s: S) -> S:
        return {"result": rt.llm("ask", "Revise the article to address the feedback.", s["draft"], s["feedback"])}

    return chain(write, feedback, revise), {"brief": "Why cities are planting more trees."}


def case5(rt):  # malformed capability call: one of two arguments
    def fetch_weather(city: str, days: float) -> dict:
        return rt.tool("http_get", {"url": f"https://weather.example.com/{city}?days={days}"})

    def forecast(s: S) -> S:
        return {"forecast": fetch_weather(s["city"])}

    def packing(s: S) -> S:
        return {"result": rt.llm("ask", f"Suggest a packing list for a trip to {s['city']} given this forecast.", s["forecast"])}

    return chain(forecast, packing), {"city": "Lisbon"}


CASES = [
    ("01_undefined_variable", case1),
    ("02_type_mismatch", case2),
    ("03_void_use", case3),
    ("04_unknown_flow", case4),
    ("05_bad_capability_call", case5),
]


def main():
    a = common.parse_args()
    out = {"workload": "3", "style": a.style, "cases": []}
    total_ms, total_calls = 0.0, 0
    for name, make in CASES:
        rt = common.Runtime(a.base_url, a.tool_ms)
        graph, state = make(rt)
        t0 = time.perf_counter()
        try:
            graph.invoke(state)
            err = None
        except Exception as e:
            err = f"{type(e).__name__}: {e}"
        ms = (time.perf_counter() - t0) * 1000.0
        total_ms += ms
        total_calls += rt.calls
        out["cases"].append({"case": name, "detected": err is not None, "error": err,
                             "detect_ms": ms, "llm_calls": rt.calls})
    out.update(ok=True, error=None, in_process_ms=total_ms, llm_calls=total_calls,
               input_tokens=0, output_tokens=0, max_in_flight=1, width=1, result=None)
    sys.stdout.write(json.dumps(out) + "\n")


if __name__ == "__main__":
    main()
