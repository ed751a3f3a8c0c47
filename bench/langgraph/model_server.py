"""A scripted model behind the OpenAI Chat Completions API, for comparing
runtimes on the LLMCompiler shapes (ais-bench plans --model-url, and the
LangGraph baselines in plans.py). It is not a model: every reply is decided
from the request, after a fixed latency, so that both runtimes see the same
model.

The question names the shape: "SHAPE lookups=N arithmetic=0|1 ...".
- A request whose prompt asks for an AIS plan (our `solve`) gets the plan,
  streamed a line at a time over the planner latency when `stream` is set.
- A request carrying "LLMCOMPILER-PLAN" (the LangGraph planner) gets the
  same plan as JSON tasks.
- A request carrying "Answer from the results" gets the answer.
- Otherwise, with tools offered (ReAct), the next step: the next lookup (or
  all remaining ones with "PARALLEL" in the question), then the arithmetic
  when asked for, then the answer.

Usage: python3 model_server.py PORT TURN_MS PLANNER_MS
"""

import json
import re
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

TURN = PLANNER = 0.0


def shape_of(text):
    m = re.search(r"SHAPE lookups=(\d+) arithmetic=(\d)", text)
    if not m:
        return 2, False
    return int(m.group(1)), m.group(2) == "1"


def ais_plan(n, arithmetic):
    lines = ["```ais"]
    names = [f"r{i}" for i in range(n)]
    for i in range(n):
        lines.append(f'let r{i} = lookup("item {i}")')
    ctx = ", ".join(names)
    if arithmetic:
        holes = " + ".join("{" + x + "}" for x in names)
        lines.append(f'let total = calc("{holes}")')
        ctx = "total"
    lines.append(f'let answer = ask("Answer from the results", {ctx})')
    lines.append("return answer")
    lines.append("```")
    return "\n".join(lines)


def json_plan(n, arithmetic):
    tasks = [{"id": i, "tool": "lookup", "args": {"q": f"item {i}"}, "deps": []} for i in range(n)]
    if arithmetic:
        tasks.append({"id": n, "tool": "calc", "args": {"expression": "sum"}, "deps": list(range(n))})
    return json.dumps(tasks)


def all_text(body):
    out = []
    for m in body.get("messages", []):
        c = m.get("content")
        if isinstance(c, str):
            out.append(c)
        elif isinstance(c, list):
            out.extend(p.get("text", "") for p in c if isinstance(p, dict))
    return "\n".join(out)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_POST(self):
        length = int(self.headers.get("content-length", "0"))
        body = json.loads(self.rfile.read(length) or b"{}")
        text = all_text(body)
        n, arithmetic = shape_of(text)
        started = time.monotonic()
        if "body of an AIS flow" in text:
            plan = ais_plan(n, arithmetic)
            if body.get("stream"):
                return self.stream_lines(plan, started)
            self.wait(started, PLANNER)
            return self.reply(plan, [])
        if "LLMCOMPILER-PLAN" in text:
            self.wait(started, PLANNER)
            return self.reply(json_plan(n, arithmetic), [])
        if "Answer from the results" in text or not body.get("tools"):
            self.wait(started, TURN)
            return self.reply("the answer", [])
        called = [
            c["function"]["name"]
            for m in body.get("messages", [])
            if m.get("role") == "assistant"
            for c in (m.get("tool_calls") or [])
        ]
        lookups = called.count("lookup")
        self.wait(started, TURN)
        if lookups < n:
            todo = range(lookups, n) if "PARALLEL" in text else [lookups]
            calls = [("lookup", {"q": f"item {i}"}) for i in todo]
            return self.reply("", calls)
        if arithmetic and "calc" not in called:
            return self.reply("", [("calc", {"expression": "sum"})])
        return self.reply("the answer", [])

    def wait(self, started, seconds):
        left = started + seconds - time.monotonic()
        if left > 0:
            time.sleep(left)

    def reply(self, text, calls):
        message = {"role": "assistant", "content": text or None}
        if calls:
            message["tool_calls"] = [
                {"id": f"call_{i}_{time.monotonic_ns()}", "type": "function",
                 "function": {"name": name, "arguments": json.dumps(args)}}
                for i, (name, args) in enumerate(calls)
            ]
        out = json.dumps({
            "id": "scripted", "object": "chat.completion", "model": "scripted",
            "choices": [{"index": 0, "message": message,
                         "finish_reason": "tool_calls" if calls else "stop"}],
            "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120},
        }).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def stream_lines(self, plan, started):
        """The plan a line at a time, the planner latency spread evenly."""
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        lines = plan.split("\n")
        pieces = [l + "\n" for l in lines[:-1]] + [lines[-1]]

        def chunk(obj):
            data = b"data: " + (obj if isinstance(obj, bytes) else json.dumps(obj).encode()) + b"\n\n"
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            self.wfile.flush()

        for i, piece in enumerate(pieces):
            self.wait(started, PLANNER * (i + 1) / len(pieces))
            chunk({"id": "s", "object": "chat.completion.chunk", "model": "scripted",
                   "choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": None}]})
        chunk({"id": "s", "object": "chat.completion.chunk", "model": "scripted",
               "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
        chunk({"id": "s", "object": "chat.completion.chunk", "model": "scripted", "choices": [],
               "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120}})
        chunk(b"[DONE]")
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()


def main():
    global TURN, PLANNER
    port = int(sys.argv[1])
    TURN = int(sys.argv[2]) / 1000.0
    PLANNER = int(sys.argv[3]) / 1000.0
    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.daemon_threads = True
    print(f"ready {server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
