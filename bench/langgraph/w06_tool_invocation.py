"""Workload 6 — Tool Invocation (examples/06_tool_invocation.ais).

Tools sleep the same fixed latency as the AIS bench host's. seq: one tool
after the other; par: the four independent tools fan out (the quote branch
runs http_get then json_query in one node), then the ask."""
from typing import TypedDict

from langgraph.graph import END, START, StateGraph

import common


class S(TypedDict, total=False):
    ticker: str
    quote: dict
    price: float
    growth: float
    analyst_notes: str
    timestamp: str
    result: str


def build(rt: common.Runtime, style: str, args: dict):
    def quote(s: S) -> S:
        return {"quote": rt.tool("http_get", {"url": f"https://api.example.com/v1/quote/{s['ticker']}"})}

    def price(s: S) -> S:
        return {"price": rt.tool("json_query", {"document": s["quote"], "path": "$.quote.last_price"})}

    def quote_price(s: S) -> S:
        q = quote(s)["quote"]
        return {"quote": q, "price": price({"quote": q})["price"]}

    def growth(s: S) -> S:
        return {"growth": rt.tool("calculator", {"expression": "(182.40 - 151.90) / 151.90 * 100"})}

    def notes(s: S) -> S:
        return {"analyst_notes": rt.tool("read_file", {"path": f"notes/{s['ticker']}.md"})}

    def timestamp(s: S) -> S:
        return {"timestamp": rt.tool("now", {})}

    def note(s: S) -> S:
        return {"result": rt.llm("ask", f"Write a five-sentence market note on {s['ticker']} as of {s['timestamp']}. Last price: {common.text_of(s['price'])}. Year-over-year growth in percent: {common.text_of(s['growth'])}. Take the analyst notes into account.", s["analyst_notes"])}

    g = StateGraph(S)
    if style == "seq":
        steps = [quote, growth, notes, timestamp, price, note]
        prev = START
        for f in steps:
            g.add_node(f.__name__, f)
            g.add_edge(prev, f.__name__)
            prev = f.__name__
        g.add_edge(prev, END)
    else:
        branches = [quote_price, growth, notes, timestamp]
        for f in branches + [note]:
            g.add_node(f.__name__, f)
        for f in branches:
            g.add_edge(START, f.__name__)
        g.add_edge([f.__name__ for f in branches], "note")
        g.add_edge("note", END)
    return g.compile(), {"ticker": args["ticker"]}, 4


if __name__ == "__main__":
    common.run("6", build)
