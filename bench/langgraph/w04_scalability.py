"""Workload 4 — Scalability, fan-out N = 2, 4, 8, 64
(examples/04_scalability_n{2,4,8,64}.ais). Pass --n.

seq: N nodes one after the other; par: one ``Send`` per prompt from START,
joined by a reducer, then the merge node."""
import operator
from typing import Annotated, TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.types import Send

import common

THEMES = [
    "its historical origins and the key turning points",
    "its economic costs and benefits, and who pays for them",
    "the technologies that enable it and their current limits",
    "the regulation and public policy that shape it",
    "its environmental footprint and the trade-offs involved",
    "its effect on everyday life and on jobs",
    "its safety and security risks and how they are mitigated",
    "the most likely developments over the next ten years",
]
VIEWS = ["consumers", "small businesses", "large companies", "governments",
         "researchers", "investors", "workers", "students"]


def prompts(n: int, topic: str) -> list[str]:
    if n <= len(THEMES):
        return [f"Topic: {topic}. In three sentences, describe {t}." for t in THEMES[:n]]
    if n == 64:
        return [f"Topic: {topic}. In three sentences, describe {t}, from the point of view of {v}."
                for t in THEMES for v in VIEWS]
    raise SystemExit(f"no prompt set for N = {n}")


class S(TypedDict, total=False):
    topic: str
    answers: Annotated[list, operator.add]
    result: str


class One(TypedDict):
    i: int
    prompt: str


def build(rt: common.Runtime, style: str, args: dict, n: int):
    ps = prompts(n, args["topic"])
    g = StateGraph(S)

    def merge(s: S) -> S:
        answers = [a for _, a in sorted(s["answers"])]
        return {"result": "\n\n".join(answers)}

    g.add_node("merge", merge)
    g.add_edge("merge", END)
    if style == "seq":
        prev = START
        for i, p in enumerate(ps):
            def ask(s: S, i=i, p=p) -> S:
                return {"answers": [(i, rt.llm("ask", p))]}
            g.add_node(f"ask{i}", ask)
            g.add_edge(prev, f"ask{i}")
            prev = f"ask{i}"
        g.add_edge(prev, "merge")
    else:
        def ask(o: One) -> S:
            return {"answers": [(o["i"], rt.llm("ask", o["prompt"]))]}
        g.add_node("ask", ask)
        g.add_conditional_edges(START, lambda s: [Send("ask", {"i": i, "prompt": p}) for i, p in enumerate(ps)], ["ask"])
        g.add_edge("ask", "merge")
    return g.compile(), {"topic": args["topic"], "answers": []}, n


if __name__ == "__main__":
    a = common.parse_args(lambda ap: ap.add_argument("--n", type=int, required=True))
    common.run(f"4/n{a.n}", lambda rt, style, args: build(rt, style, args, a.n),
               extra=lambda ap: ap.add_argument("--n", type=int, required=True))
