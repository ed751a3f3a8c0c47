"""The LangGraph baseline of `ais-bench serve-load`: a FastAPI app serving
a trivial LangGraph graph (one node, no LLM call: the same work as the AIS
program `trivial.ais`, `return "about " + topic`) behind a blocking
"start a run and wait for its result" endpoint, the shape of LangGraph
Server's `POST /runs/wait` and of `aisc serve`'s `POST /v1/runs?wait=true`.

Each run gets an id and is recorded (status and result) in memory, as a
run server does; no persistence (LangGraph's in-memory dev server keeps
runs in memory too).

    uvicorn langgraph_server:app --port 8123 --workers 2 --log-level warning
"""

import uuid
from typing import TypedDict

from fastapi import FastAPI
from langgraph.graph import END, START, StateGraph
from pydantic import BaseModel


class State(TypedDict):
    topic: str
    result: str


def about(state: State) -> dict:
    return {"result": "about " + state["topic"]}


builder = StateGraph(State)
builder.add_node("about", about)
builder.add_edge(START, "about")
builder.add_edge("about", END)
graph = builder.compile()

app = FastAPI()
runs: dict[str, dict] = {}


class RunRequest(BaseModel):
    input: dict


@app.post("/runs/wait", status_code=201)
def run_wait(req: RunRequest) -> dict:
    run_id = str(uuid.uuid4())
    runs[run_id] = {"id": run_id, "status": "running"}
    out = graph.invoke(req.input)
    runs[run_id] = {"id": run_id, "status": "succeeded", "result": out["result"]}
    return runs[run_id]


@app.get("/runs/{run_id}")
def get_run(run_id: str) -> dict:
    return runs.get(run_id, {"error": "not found"})
