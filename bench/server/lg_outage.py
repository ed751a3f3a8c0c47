"""LangGraph equivalent of bench/server/outage_chain.ais: six dependent
steps, an eight-way fan-out (``Send``), a summary; every model is a
``ChatOpenAI`` on the primary with ``.with_fallbacks([...])`` to the
spare, LangChain's own fallback mechanism.

Usage: python lg_outage.py PRIMARY_URL SPARE_URL TOPIC
Prints one JSON line: ok, error, in_process_ms, result.
"""
import json
import operator
import sys
import time
from typing import Annotated, TypedDict

from langchain_core.messages import HumanMessage, SystemMessage
from langchain_openai import ChatOpenAI
from langgraph.graph import END, START, StateGraph
from langgraph.types import Send

SYSTEM = "You are a helpful assistant inside an agent workflow. Answer the request directly and concisely."
STEPS = [
    "Step 1. Restate the topic as one question: {}",
    "Step 2. Name the field that studies it: {}",
    "Step 3. Name the field's central open problem: {}",
    "Step 4. Say why the problem is hard: {}",
    "Step 5. Name one promising approach: {}",
    "Step 6. Name the approach's main risk: {}",
]
ANGLES = ["Angle 1, cost.", "Angle 2, time.", "Angle 3, people.", "Angle 4, tools.",
          "Angle 5, policy.", "Angle 6, ethics.", "Angle 7, evidence.", "Angle 8, alternatives."]


def main():
    primary, spare, topic = sys.argv[1], sys.argv[2], sys.argv[3]
    common = dict(api_key="not-needed", model="bench-ask", max_retries=1, timeout=60)
    model = ChatOpenAI(base_url=primary, **common).with_fallbacks([ChatOpenAI(base_url=spare, **common)])

    def ask(prompt):
        r = model.invoke([SystemMessage(SYSTEM), HumanMessage(prompt)])
        return r.content if isinstance(r.content, str) else str(r.content)

    class S(TypedDict, total=False):
        last: str
        angles: Annotated[list, operator.add]
        result: str

    g = StateGraph(S)

    def chain(s):
        last = topic
        for step in STEPS:
            last = ask(step.format(last))
        return {"last": last}

    def angle(x):
        return {"angles": [(x["i"], ask(f"{ANGLES[x['i']]} {x['last']}"))]}

    def summary(s):
        ctx = "".join(f"\n\n### context {i + 1}\n```\n{a}\n```" for i, (_, a) in enumerate(sorted(s["angles"])))
        return {"result": ask("Summarise the angles in one paragraph." + ctx)}

    g.add_node("chain", chain)
    g.add_node("angle", angle)
    g.add_node("summary", summary)
    g.add_edge(START, "chain")
    g.add_conditional_edges("chain", lambda s: [Send("angle", {"i": i, "last": s["last"]}) for i in range(8)])
    g.add_edge("angle", "summary")
    g.add_edge("summary", END)
    graph = g.compile()
    out = {}
    t0 = time.perf_counter()
    try:
        final = graph.invoke({"angles": []}, config={"max_concurrency": 8})
        out.update(ok=True, error=None, result=final.get("result", "")[:100])
    except Exception as e:  # the failure is the result
        out.update(ok=False, error=f"{type(e).__name__}: {e}", result=None)
    out["in_process_ms"] = (time.perf_counter() - t0) * 1000.0
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
