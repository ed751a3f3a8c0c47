"""Shared harness for the LangGraph baselines of the AIS workloads.

Every workload script builds its graph in two styles:

- ``seq``: the straightforward graph, one node after the other;
- ``par``: the best hand-parallel graph we could write (fan-out edges,
  ``Send``, independent chains folded into one node each so LangGraph's
  superstep barrier does not hold a short branch behind a long one), invoked
  with ``max_concurrency`` large enough for every branch.

Both talk to the benchmark's OpenAI-compatible mock server through
``ChatOpenAI(base_url=...)``, with the same models per latency class, the
same system prompts, the same user messages (the prompt, then each context
value fenced under ``### context N``) and, for plan/verify/reflect, the same JSON
schemas as the AIS VM (vm/src/llm/prompt.rs, vm/src/llm/schema.rs).

The script prints ONE JSON line on stdout:
``{"workload", "style", "ok", "error", "in_process_ms", "llm_calls",
"input_tokens", "output_tokens", "max_in_flight", "result"}`` where
``in_process_ms`` is the wall time of ``graph.invoke`` only.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import threading
import time
from typing import Any, Callable

from langchain_core.messages import HumanMessage, SystemMessage
from langchain_openai import ChatOpenAI

# Models per latency class: the mock server's latency is keyed by model.
MODELS = {"ask": "bench-ask", "think": "bench-think", "reason": "bench-reason"}

# Latency class of each op kind (as in the IR op table).
CLASS = {
    "ask": "ask",
    "llm": "ask",
    "think": "think",
    "plan": "think",
    "reflect": "think",
    "verify": "think",
    "reason": "reason",
}

# vm/src/llm/prompt.rs default_instruction().
SYSTEM = {
    "ask": "You are a helpful assistant inside an agent workflow. Answer the request directly and concisely.",
    "think": "You are a careful analyst inside an agent workflow. Think the problem through, then give a clear, well-organised answer.",
    "reason": "You are an expert reasoner inside an agent workflow. Reason step by step about the problem and state your conclusion explicitly.",
    "plan": "You are a planner inside an agent workflow. Break the goal into concrete steps; each step has a short id, a description, and the ids of the steps it depends on.",
    "reflect": "You are a reviewer inside an agent workflow. Critique the content honestly and give concrete suggestions to improve it.",
    "verify": "You are a verifier inside an agent workflow. Decide whether the claim is supported by the evidence and explain why.",
}

# vm/src/llm/schema.rs.
SCHEMAS = {
    "plan": {
        "type": "object",
        "required": ["steps"],
        "properties": {
            "goal": {"type": "string"},
            "steps": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["id", "description", "depends_on"],
                    "properties": {
                        "id": {"type": "string"},
                        "description": {"type": "string"},
                        "depends_on": {"type": "array", "items": {"type": "string"}},
                    },
                },
            },
        },
    },
    "verify": {
        "type": "object",
        "required": ["verdict", "reason"],
        "properties": {
            "verdict": {"type": "boolean"},
            "reason": {"type": "string"},
            "confidence": {"type": "number"},
        },
    },
    "reflect": {
        "type": "object",
        "required": ["critique", "suggestions"],
        "properties": {
            "critique": {"type": "string"},
            "suggestions": {"type": "array", "items": {"type": "string"}},
            "score": {"type": "number"},
        },
    },
}


def schema_instruction(schema: dict) -> str:
    text = json.dumps(schema, indent=2)
    return (
        "\n\nReply with a single JSON value and nothing else (no prose, no code fence). "
        "It must be valid against this JSON schema:\n```json\n" + text + "\n```"
    )


def text_of(v: Any) -> str:
    """The VM's text form of a value: strings as is, the rest as JSON."""
    if isinstance(v, str):
        return v
    return json.dumps(v, separators=(",", ":"))


class Runtime:
    """LLM calls, tools and memory for one run, with counters."""

    def __init__(self, base_url: str, tool_ms: float, max_tokens: int | None = None,
                 temperature: float | None = None):
        self.tool_s = tool_ms / 1000.0
        self.lock = threading.Lock()
        self.calls = 0
        self.input_tokens = 0
        self.output_tokens = 0
        self.in_flight = 0
        self.max_in_flight = 0
        self.memory: dict[str, list] = {"stm": [], "ltm": [], "episodic": []}
        common = dict(
            base_url=base_url,
            api_key="not-needed",
            max_retries=0,
            timeout=600,
        )
        # A real model server (real_server.py) is sent the same completion
        # limit and temperature as aisc's configuration; the mock needs none.
        if max_tokens is not None:
            common["max_tokens"] = max_tokens
        if temperature is not None:
            common["temperature"] = temperature
        self.chat = {cls: ChatOpenAI(model=m, **common) for cls, m in MODELS.items()}
        self.structured = {
            kind: ChatOpenAI(model=MODELS["think"], **common).bind(
                response_format={
                    "type": "json_schema",
                    "json_schema": {"name": f"{kind}_reply", "schema": s, "strict": False},
                }
            )
            for kind, s in SCHEMAS.items()
        }

    def llm(self, kind: str, prompt: str, *context: Any) -> Any:
        """One LLM call of op kind `kind` (ask, think, reason, plan, ...)."""
        user = prompt
        for i, c in enumerate(context):
            # The VM's framing (vm/src/llm/prompt.rs): a fence longer than
            # any backtick run in the value. (The VM labels a block with
            # the variable it came from; here blocks keep `context N`.)
            text = text_of(c)
            longest = max((len(r) for r in re.findall(r"`+", text)), default=0)
            fence = "`" * (max(longest, 2) + 1)
            user += f"\n\n### context {i + 1}\n{fence}\n{text}\n{fence}"
        system = SYSTEM[CLASS[kind] if kind in ("ask", "llm", "think", "reason") else kind]
        model = self.chat[CLASS[kind]]
        if kind in SCHEMAS:
            system += schema_instruction(SCHEMAS[kind])
            model = self.structured[kind]
        with self.lock:
            self.calls += 1
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            reply = model.invoke([SystemMessage(system), HumanMessage(user)])
        finally:
            with self.lock:
                self.in_flight -= 1
        usage = getattr(reply, "usage_metadata", None) or {}
        with self.lock:
            self.input_tokens += int(usage.get("input_tokens", 0))
            self.output_tokens += int(usage.get("output_tokens", 0))
        text = reply.content if isinstance(reply.content, str) else str(reply.content)
        if kind in SCHEMAS:
            return json.loads(text)
        return text

    def tool(self, name: str, args: dict) -> Any:
        """The same canned tools (and fixed latency) as the AIS bench host."""
        time.sleep(self.tool_s)
        if name == "http_get":
            return {"url": args.get("url", ""), "quote": {"last_price": 182.4, "currency": "USD"}}
        if name == "calculator":
            return 20.08
        if name == "json_query":
            doc, path = args.get("document"), str(args.get("path", ""))
            for part in path.lstrip("$").strip(".").split("."):
                if part and isinstance(doc, dict):
                    doc = doc.get(part)
            return doc
        if name == "read_file":
            return f"Analyst notes from {args.get('path', '')}: margins stable, guidance raised."
        if name == "now":
            return "2025-01-01T00:00:00Z"
        if name == "web_search":
            q = args.get("query", "")
            return {"query": q, "results": [{"title": f"Result {i} for {q}", "url": f"https://example.com/{i}"} for i in range(3)]}
        raise KeyError(f"no tool named `{name}`")

    def umem(self, value: Any, tier: str) -> None:
        with self.lock:
            self.memory[tier].append(value)

    def qmem(self, query: str, tier: str) -> list:
        with self.lock:
            q = query.lower()
            return [v for v in self.memory[tier] if q in text_of(v).lower()]


def parse_args(extra: Callable[[argparse.ArgumentParser], None] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser()
    ap.add_argument("--style", choices=["seq", "par"], default="seq")
    ap.add_argument("--base-url", required=True, help="the mock's OpenAI base URL (…/v1)")
    ap.add_argument("--tool-ms", type=float, default=50.0)
    ap.add_argument("--args", default="{}", help="entry arguments as a JSON object")
    ap.add_argument("--max-tokens", type=int, default=None, help="completion limit of every call")
    ap.add_argument("--temperature", type=float, default=None)
    if extra:
        extra(ap)
    return ap.parse_args()


def run(workload: str, build: Callable[[Runtime, str, dict], Any], extra=None) -> None:
    """Builds the graph with `build(rt, style, args)` (returns (graph, state,
    max_concurrency)), invokes it once, prints the JSON line."""
    a = parse_args(extra)
    entry = json.loads(a.args)
    rt = Runtime(a.base_url, a.tool_ms, a.max_tokens, a.temperature)
    graph, state, width = build(rt, a.style, entry)
    out: dict[str, Any] = {"workload": workload, "style": a.style}
    t0 = time.perf_counter()
    try:
        final = graph.invoke(state, config={"max_concurrency": max(1, width)})
        out["ok"] = True
        out["error"] = None
        res = final.get("result") if isinstance(final, dict) else None
        out["result"] = None if res is None else text_of(res)[:200]
    except Exception as e:  # the failure and when it surfaced are the result
        out["ok"] = False
        out["error"] = f"{type(e).__name__}: {e}"
        out["result"] = None
    out["in_process_ms"] = (time.perf_counter() - t0) * 1000.0
    out["llm_calls"] = rt.calls
    out["input_tokens"] = rt.input_tokens
    out["output_tokens"] = rt.output_tokens
    out["max_in_flight"] = rt.max_in_flight
    out["width"] = width
    sys.stdout.write(json.dumps(out) + "\n")
    sys.stdout.flush()
