"""Workload 8 — Planning (examples/08_planning.ais).

seq: plan, the three step elaborations in turn, verify; par: one ``Send``
per plan step, then verify."""
import operator
from typing import Annotated, TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.types import Send

import common

STEP = "Work out the concrete commands and checks for this step of the plan."


class S(TypedDict, total=False):
    objective: str
    constraints: str
    roadmap: dict
    steps: Annotated[list, operator.add]
    result: dict


class One(TypedDict):
    i: int
    step: dict
    constraints: str


def build(rt: common.Runtime, style: str, args: dict):
    def plan(s: S) -> S:
        return {"roadmap": rt.llm("plan", s["objective"], s["constraints"])}

    def step(o: One) -> S:
        return {"steps": [(o["i"], rt.llm("reason", STEP, o["step"], o["constraints"]))]}

    def review(s: S) -> S:
        runbook = "\n\n".join(t for _, t in sorted(s["steps"]))
        v = rt.llm("verify", f"This runbook achieves the objective without violating the constraints: {s['objective']}", runbook)
        print("Runbook review:", common.text_of(v), file=__import__("sys").stderr)
        return {"result": s["roadmap"]}

    g = StateGraph(S)
    g.add_node("plan", plan)
    g.add_node("review", review)
    g.add_edge(START, "plan")
    if style == "seq":
        prev = "plan"
        for i in range(3):
            def one(s: S, i=i) -> S:
                return step({"i": i, "step": s["roadmap"]["steps"][i], "constraints": s["constraints"]})
            g.add_node(f"step{i}", one)
            g.add_edge(prev, f"step{i}")
            prev = f"step{i}"
        g.add_edge(prev, "review")
    else:
        g.add_node("step", step)
        g.add_conditional_edges("plan", lambda s: [Send("step", {"i": i, "step": s["roadmap"]["steps"][i], "constraints": s["constraints"]}) for i in range(3)], ["step"])
        g.add_edge("step", "review")
    g.add_edge("review", END)
    return g.compile(), {"objective": args["objective"], "constraints": args["constraints"], "steps": []}, 3


if __name__ == "__main__":
    common.run("8", build)
