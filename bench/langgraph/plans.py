"""LangGraph baselines for `ais-bench plans`: the LLMCompiler shapes with
LangGraph's prebuilt ReAct agent (`create_react_agent`) and a
plan-and-execute graph in the LLMCompiler style (a planner node writes the
tasks, an executor node runs each as soon as its dependencies are done, in
parallel threads, a joiner node asks for the answer), against the scripted
model server (model_server.py). Tools sleep the tool latency. Writes the
makespans as JSON for `ais-bench plans --baseline`.

Usage: python plans.py URL RUNS TOOL_MS OUT.json
"""

import json
import statistics
import sys
import threading
import time
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from typing import TypedDict

from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from langgraph.graph import END, START, StateGraph
from langgraph.prebuilt import create_react_agent

SHAPES = [(2, False), (4, True), (8, False)]
TOOL = 0.0
CALLS = 0
LOCK = threading.Lock()


def count_call():
    global CALLS
    with LOCK:
        CALLS += 1


@tool
def lookup(q: str) -> str:
    """Look up an item."""
    count_call()
    time.sleep(TOOL)
    return "7"


@tool
def calc(expression: str) -> str:
    """Evaluate an arithmetic expression."""
    count_call()
    time.sleep(TOOL)
    return "28"


TOOLS = {"lookup": lookup, "calc": calc}


def question(n, arithmetic):
    return f"the question (SHAPE lookups={n} arithmetic={int(arithmetic)})"


class PlanState(TypedDict, total=False):
    question: str
    tasks: list
    results: dict
    answer: str


def plan_graph(llm):
    def planner(state):
        reply = llm.invoke([
            ("system", "LLMCOMPILER-PLAN: write the tasks that answer the question as a JSON list of {id, tool, args, deps}."),
            ("user", state["question"]),
        ])
        return {"tasks": json.loads(reply.content)}

    def executor(state):
        tasks = {t["id"]: t for t in state["tasks"]}
        results = {}
        running = {}
        with ThreadPoolExecutor(max_workers=max(1, len(tasks))) as pool:
            while len(results) < len(tasks):
                for tid, t in tasks.items():
                    if tid not in results and tid not in running and all(d in results for d in t["deps"]):
                        running[tid] = pool.submit(TOOLS[t["tool"]].invoke, t["args"])
                done, _ = wait(list(running.values()), return_when=FIRST_COMPLETED)
                for tid, fut in list(running.items()):
                    if fut in done:
                        results[tid] = fut.result()
                        del running[tid]
        return {"results": results}

    def joiner(state):
        reply = llm.invoke([("user", "Answer from the results: " + json.dumps(state["results"]))])
        return {"answer": reply.content}

    g = StateGraph(PlanState)
    g.add_node("planner", planner)
    g.add_node("executor", executor)
    g.add_node("joiner", joiner)
    g.add_edge(START, "planner")
    g.add_edge("planner", "executor")
    g.add_edge("executor", "joiner")
    g.add_edge("joiner", END)
    return g.compile()


def measure(run, runs):
    global CALLS
    run()  # warm-up: imports, connections
    ms, turns = [], 0
    for _ in range(runs):
        CALLS = 0
        t = time.perf_counter()
        turns = run()
        ms.append((time.perf_counter() - t) * 1e3)
    return {"mean": statistics.mean(ms), "std": statistics.pstdev(ms), "turns": turns, "calls": CALLS}


def main():
    global TOOL
    url, runs, tool_ms, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    TOOL = tool_ms / 1000.0
    llm = ChatOpenAI(base_url=url, api_key="scripted", model="scripted", max_retries=0)
    react = create_react_agent(llm, [lookup, calc])
    planned = plan_graph(llm)
    results = {}
    for n, arithmetic in SHAPES:
        q = question(n, arithmetic)

        def run_react():
            r = react.invoke({"messages": [("user", q)]})
            assert r["messages"][-1].content == "the answer", r["messages"][-1]
            return sum(1 for m in r["messages"] if m.type == "ai")

        def run_plan():
            r = planned.invoke({"question": q})
            assert r["answer"] == "the answer", r
            return 2

        results[f"{n}/{int(arithmetic)}"] = {
            "react": measure(run_react, runs),
            "plan": measure(run_plan, runs),
        }
        print(n, arithmetic, results[f"{n}/{int(arithmetic)}"], flush=True)
    with open(out, "w") as f:
        json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
