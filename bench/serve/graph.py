from typing import TypedDict
from langgraph.graph import END, START, StateGraph


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
