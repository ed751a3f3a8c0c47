"""An independent benchmark server that behaves like an LLM provider.

Not a model and not our mock (testkit/src/mock): a separate Python process
on loopback, written for issue 36's benchmarks, that both our runtime and
the LangGraph baselines talk to over the providers' own protocols:

- OpenAI Chat Completions (``POST /v1/chat/completions``) and Anthropic
  Messages (``POST /v1/messages``), whole or streamed (SSE), with tool
  calling: offered tools and no tool result yet -> the model calls the
  first tool with arguments made from its schema; otherwise a text answer.
- Prefix caching with cached-token usage, priced per provider. OpenAI:
  automatic for prompts of 1024 tokens or more, in 128-token blocks,
  reported as ``usage.prompt_tokens_details.cached_tokens``. Anthropic:
  explicit ``cache_control`` breakpoints (at most 4; tools -> system ->
  messages), a prefix of 1024 tokens or more written at 1.25x the input
  price and read at 0.1x (``cache_creation_input_tokens``,
  ``cache_read_input_tokens``). Tokens are counted as 4 characters each.
  A prefix written by a request can be read once that request has been
  answered (``--cache-visible reply``, the default: Anthropic documents
  that a cache entry is available only after the first response begins,
  so concurrent requests with the same prefix all miss), or at once
  (``--cache-visible arrival``).
- Heavy-tailed latency, seeded: 98 % of requests take p50 x lognormal(0,
  0.15), 2 % take 10 x p50 x lognormal(0, 0.5), so p99 = 10 x p50. The
  draw for a request is a function of the seed, its body and how many
  times that body was seen before: reproducible whatever the interleaving,
  and a repeated request (a retry, a hedge) gets a draw of its own.
- Rate-limit bursts: every ``burst_period_s`` seconds, for
  ``burst_length_s``, requests get ``429`` with ``Retry-After``.
- An outage: after ``outage_after`` accepted requests (or between
  ``outage_start_s`` and ``outage_end_s`` after start) every request gets
  ``503`` (``outage_mode = "503"``) or its connection closed unanswered
  (``"reset"``).
- Counters: ``GET /admin/counters`` (requests, answers by status, in
  flight now and at peak, abandoned replies, tokens, cached tokens, cost,
  observed latency percentiles); ``GET /admin/completed`` (each answered
  prompt's hash and how often it was answered); ``POST /admin/reset``;
  ``POST /admin/config`` (any setting below, as JSON).

Usage: python3 server.py --port 0 [--seed 1] [--p50-ms 100] [--slow-frac 0.02]
       [--outage-after N] [--outage-mode 503|reset] [--burst-period-s S
       --burst-length-s S --retry-after-s S] [--provider-name NAME]
Prints ``ready PORT`` when listening.
"""

import argparse
import hashlib
import json
import math
import random
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

# Dollars per million tokens (list prices of late 2025: gpt-5 and
# claude-sonnet-4); `cached` is a cache read, `write` an Anthropic cache write.
PRICES = {
    "openai": {"input": 1.25, "cached": 0.125, "write": 1.25, "output": 10.0},
    "anthropic": {"input": 3.0, "cached": 0.30, "write": 3.75, "output": 15.0},
}
MIN_CACHE_TOKENS = 1024
BLOCK_TOKENS = 128


def tokens(text):
    return max(1, (len(text) + 3) // 4)


class State:
    def __init__(self, cfg):
        self.cfg = cfg
        self.lock = threading.Lock()
        self.started = time.monotonic()
        self.reset()

    def reset(self):
        self.seen = {}  # body hash -> times seen (for the latency draw)
        self.completed = {}  # prompt hash -> times answered
        self.cache = {"openai": set(), "anthropic": set()}
        self.c = {
            "requests": 0, "accepted": 0, "answered": 0, "status": {}, "in_flight": 0,
            "in_flight_peak": 0, "abandoned": 0, "input_tokens": 0,
            "cached_tokens": 0, "cache_write_tokens": 0, "output_tokens": 0,
            "cost_usd": 0.0, "latencies_ms": [],
        }

    def counters(self):
        with self.lock:
            c = dict(self.c)
            lat = sorted(c.pop("latencies_ms"))
        def pct(q):
            if not lat:
                return None
            return lat[min(len(lat) - 1, int(math.ceil(q * len(lat))) - 1)]
        c["latency_p50_ms"] = pct(0.5)
        c["latency_p99_ms"] = pct(0.99)
        c["repeated"] = sum(1 for n in self.completed.values() if n > 1)
        return c


def draw_latency(cfg, key, nth):
    r = random.Random(f"{cfg['seed']}:{key}:{nth}")
    p50 = cfg["p50_ms"] / 1000.0
    if r.random() < cfg["slow_frac"]:
        return 10 * p50 * math.exp(r.gauss(0, 0.5))
    return p50 * math.exp(r.gauss(0, 0.15))


def message_text(content):
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") if isinstance(p, dict) else str(p) for p in content)
    return ""


def has_breakpoint(x):
    return isinstance(x, dict) and "cache_control" in x


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    state = None

    def log_message(self, *args):
        pass

    # -- admin -------------------------------------------------------------
    def do_GET(self):
        st = self.state
        if self.path == "/admin/counters":
            return self.json(200, st.counters())
        if self.path == "/admin/completed":
            with st.lock:
                return self.json(200, dict(st.completed))
        if self.path in ("/", "/health"):
            return self.json(200, {"ok": True})
        return self.json(404, {"error": {"message": "not found"}})

    def do_POST(self):
        length = int(self.headers.get("content-length", "0") or 0)
        raw = self.rfile.read(length) if length else b""
        st = self.state
        if self.path == "/admin/reset":
            with st.lock:
                st.reset()
                st.started = time.monotonic()
            return self.json(200, {"ok": True})
        if self.path == "/admin/config":
            with st.lock:
                st.cfg.update(json.loads(raw or b"{}"))
            return self.json(200, st.cfg)
        if self.path.endswith("/chat/completions"):
            return self.chat(raw, "openai")
        if self.path.endswith("/messages"):
            return self.chat(raw, "anthropic")
        return self.json(404, {"error": {"message": f"no route {self.path}"}})

    # -- provider behaviour ---------------------------------------------------
    def chat(self, raw, proto):
        st, cfg = self.state, self.state.cfg
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            return self.json(400, {"error": {"message": "body is not JSON", "type": "invalid_request_error"}})
        key = hashlib.sha256(raw).hexdigest()[:16]
        out_after = cfg.get("outage_after")
        with st.lock:
            st.c["requests"] += 1
            nth = st.seen.get(key, 0)
            st.seen[key] = nth + 1
            now = time.monotonic() - st.started
            # Requests taken on before the outage (counted on arrival, so
            # a fan-out cannot slip more than `outage_after` through).
            down = out_after is not None and st.c["accepted"] >= out_after
            if not down:
                st.c["accepted"] += 1
        # An outage, then rate-limit bursts, before any work.
        in_window = cfg.get("outage_start_s") is not None and cfg["outage_start_s"] <= now < cfg.get("outage_end_s", 1e18)
        if down or in_window:
            self.count_status(503)
            if cfg.get("outage_mode") == "reset":
                self.close_connection = True
                try:
                    self.connection.shutdown(2)
                except OSError:
                    pass
                return
            return self.error(proto, 503, "overloaded_error", "the service is unavailable (outage)")
        period = cfg.get("burst_period_s")
        if period and (now % period) < cfg.get("burst_length_s", 0):
            self.count_status(429)
            return self.error(proto, 429, "rate_limit_error", "rate limited (burst)",
                              {"retry-after": str(int(math.ceil(cfg.get("retry_after_s", 1))))})
        messages = body.get("messages", [])
        system = body.get("system", "")
        tools = body.get("tools") or []
        user_text = "\n".join(message_text(m.get("content")) for m in messages if m.get("role") == "user")
        prompt_hash = hashlib.sha256(user_text.encode()).hexdigest()[:16]
        fresh = []
        usage = self.prompt_usage(proto, system, tools, messages, fresh)
        if cfg.get("cache_visible", "reply") == "arrival":
            self.publish(fresh)
        with st.lock:
            st.c["in_flight"] += 1
            st.c["in_flight_peak"] = max(st.c["in_flight_peak"], st.c["in_flight"])
        t0 = time.monotonic()
        try:
            time.sleep(draw_latency(cfg, key, nth))
            self.publish(fresh)
            text, calls = self.decide(messages, tools, user_text)
            out_tokens = tokens(text) + sum(tokens(json.dumps(a)) for _, a in calls)
            sent = self.send_reply(proto, body, text, calls, usage, out_tokens)
        finally:
            with st.lock:
                st.c["in_flight"] -= 1
        with st.lock:
            if not sent:
                st.c["abandoned"] += 1
                return
            st.c["answered"] += 1
            st.c["status"]["200"] = st.c["status"].get("200", 0) + 1
            st.c["latencies_ms"].append((time.monotonic() - t0) * 1000.0)
            st.completed[prompt_hash] = st.completed.get(prompt_hash, 0) + 1
            p = PRICES[proto]
            st.c["input_tokens"] += usage["input"]
            st.c["cached_tokens"] += usage["cached"]
            st.c["cache_write_tokens"] += usage["write"]
            st.c["output_tokens"] += out_tokens
            st.c["cost_usd"] += (usage["input"] * p["input"] + usage["cached"] * p["cached"]
                                 + usage["write"] * p["write"] + out_tokens * p["output"]) / 1e6

    def count_status(self, code):
        with self.state.lock:
            s = self.state.c["status"]
            s[str(code)] = s.get(str(code), 0) + 1

    def publish(self, fresh):
        """Makes the prefixes a request wrote readable (idempotent)."""
        with self.state.lock:
            for proto, d in fresh:
                self.state.cache[proto].add(d)
        fresh.clear()

    def prompt_usage(self, proto, system, tools, messages, fresh):
        """Input tokens split into uncached, cached (read) and written;
        prefixes written go to `fresh`, readable once published."""
        st = self.state
        if proto == "openai":
            text = json.dumps(tools) + "".join(message_text(m.get("content")) for m in messages)
            total = tokens(text)
            cached = 0
            if total >= MIN_CACHE_TOKENS:
                chunk = BLOCK_TOKENS * 4
                h = hashlib.sha256()
                hits = True
                with st.lock:
                    for i in range(0, len(text) - len(text) % chunk, chunk):
                        h.update(text[i:i + chunk].encode())
                        d = h.hexdigest()
                        if hits and d in st.cache["openai"]:
                            cached += BLOCK_TOKENS
                        else:
                            hits = False
                            fresh.append(("openai", d))
            return {"input": total - cached, "cached": cached, "write": 0}
        # Anthropic: the render order is tools, system, messages; each
        # breakpoint marks the end of a prefix that may be cached.
        parts = [(json.dumps(t), has_breakpoint(t)) for t in tools]
        if isinstance(system, list):
            parts += [(message_text([b]), has_breakpoint(b)) for b in system]
        elif system:
            parts.append((system, False))
        for m in messages:
            c = m.get("content")
            if isinstance(c, list):
                parts += [(message_text([b]), has_breakpoint(b)) for b in c]
            else:
                parts.append((message_text(c), False))
        total = sum(tokens(t) for t, _ in parts)
        prefix, cached, write = "", 0, 0
        ends = []
        for t, bp in parts:
            prefix += t
            if bp:
                ends.append(prefix)
        ends = ends[-4:]
        with st.lock:
            best = 0
            for p in ends:
                d = hashlib.sha256(p.encode()).hexdigest()
                n = tokens(p)
                if n < MIN_CACHE_TOKENS:
                    continue
                if d in st.cache["anthropic"]:
                    best = max(best, n)
                else:
                    fresh.append(("anthropic", d))
                    write = max(write, n)
            cached = best
            write = max(0, write - cached)
        return {"input": max(0, total - cached - write), "cached": cached, "write": write}

    def decide(self, messages, tools, user_text):
        results = any(m.get("role") == "tool" for m in messages) or any(
            isinstance(m.get("content"), list)
            and any(isinstance(b, dict) and b.get("type") == "tool_result" for b in m["content"])
            for m in messages)
        if tools and not results:
            t = tools[0]
            fn = t.get("function", t)
            schema = fn.get("parameters") or fn.get("input_schema") or {}
            args = {k: ("x" if v.get("type") == "string" else 1)
                    for k, v in (schema.get("properties") or {}).items()}
            return "", [(fn.get("name", "tool"), args)]
        head = " ".join(user_text.split()[:12])[:80]
        return f"Answer about: {head}", []

    def send_reply(self, proto, body, text, calls, usage, out_tokens):
        model = body.get("model", "bench")
        stream = bool(body.get("stream"))
        try:
            if proto == "openai":
                u = {"prompt_tokens": usage["input"] + usage["cached"], "completion_tokens": out_tokens,
                     "total_tokens": usage["input"] + usage["cached"] + out_tokens,
                     "prompt_tokens_details": {"cached_tokens": usage["cached"]}}
                msg = {"role": "assistant", "content": text or None}
                if calls:
                    msg["tool_calls"] = [{"id": f"call_{i}", "type": "function",
                                          "function": {"name": n, "arguments": json.dumps(a)}}
                                         for i, (n, a) in enumerate(calls)]
                finish = "tool_calls" if calls else "stop"
                if not stream:
                    self.json(200, {"id": "bench", "object": "chat.completion", "model": model,
                                    "choices": [{"index": 0, "message": msg, "finish_reason": finish}],
                                    "usage": u})
                    return True
                delta = {"role": "assistant", "content": text}
                if calls:
                    delta["tool_calls"] = [dict(c, index=i) for i, c in enumerate(msg["tool_calls"])]
                events = [
                    {"id": "bench", "object": "chat.completion.chunk", "model": model,
                     "choices": [{"index": 0, "delta": delta, "finish_reason": None}]},
                    {"id": "bench", "object": "chat.completion.chunk", "model": model,
                     "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]},
                    {"id": "bench", "object": "chat.completion.chunk", "model": model, "choices": [], "usage": u},
                ]
                self.sse([(None, e) for e in events] + [(None, "[DONE]")])
                return True
            u = {"input_tokens": usage["input"], "output_tokens": out_tokens,
                 "cache_creation_input_tokens": usage["write"], "cache_read_input_tokens": usage["cached"]}
            content = ([{"type": "text", "text": text}] if text else []) + [
                {"type": "tool_use", "id": f"toolu_{i}", "name": n, "input": a} for i, (n, a) in enumerate(calls)]
            stop = "tool_use" if calls else "end_turn"
            if not stream:
                self.json(200, {"id": "msg_bench", "type": "message", "role": "assistant", "model": model,
                                "content": content, "stop_reason": stop, "usage": u})
                return True
            events = [("message_start", {"type": "message_start", "message": {
                "id": "msg_bench", "type": "message", "role": "assistant", "model": model, "content": [],
                "usage": dict(u, output_tokens=0)}})]
            for i, block in enumerate(content):
                if block["type"] == "text":
                    events += [("content_block_start", {"type": "content_block_start", "index": i,
                                                        "content_block": {"type": "text", "text": ""}}),
                               ("content_block_delta", {"type": "content_block_delta", "index": i,
                                                        "delta": {"type": "text_delta", "text": block["text"]}})]
                else:
                    events += [("content_block_start", {"type": "content_block_start", "index": i,
                                                        "content_block": dict(block, input={})}),
                               ("content_block_delta", {"type": "content_block_delta", "index": i,
                                                        "delta": {"type": "input_json_delta",
                                                                  "partial_json": json.dumps(block["input"])}})]
                events.append(("content_block_stop", {"type": "content_block_stop", "index": i}))
            events += [("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop},
                                          "usage": {"output_tokens": out_tokens}}),
                       ("message_stop", {"type": "message_stop"})]
            self.sse(events)
            return True
        except (BrokenPipeError, ConnectionResetError, OSError):
            # The client gave up (a cancelled hedge, a timeout).
            self.close_connection = True
            return False

    def error(self, proto, code, kind, message, headers=None):
        if proto == "anthropic":
            body = {"type": "error", "error": {"type": kind, "message": message}}
        else:
            body = {"error": {"message": message, "type": kind, "code": kind}}
        self.json(code, body, headers)

    def json(self, code, obj, headers=None):
        out = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(out)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(out)

    def sse(self, events):
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        for name, data in events:
            payload = data if isinstance(data, str) else json.dumps(data)
            frame = (f"event: {name}\n" if name else "") + f"data: {payload}\n\n"
            b = frame.encode()
            self.wfile.write(b"%x\r\n%s\r\n" % (len(b), b))
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()


class Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 512

    def handle_error(self, request, client_address):
        # A client closing a kept-alive connection (a cancelled hedge's)
        # is not an error of the server.
        import sys
        if not isinstance(sys.exc_info()[1], (ConnectionResetError, BrokenPipeError)):
            super().handle_error(request, client_address)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--p50-ms", type=float, default=100.0)
    ap.add_argument("--slow-frac", type=float, default=0.02)
    ap.add_argument("--cache-visible", choices=["reply", "arrival"], default="reply")
    ap.add_argument("--outage-after", type=int)
    ap.add_argument("--outage-start-s", type=float)
    ap.add_argument("--outage-end-s", type=float)
    ap.add_argument("--outage-mode", choices=["503", "reset"], default="503")
    ap.add_argument("--burst-period-s", type=float)
    ap.add_argument("--burst-length-s", type=float, default=0.0)
    ap.add_argument("--retry-after-s", type=float, default=1.0)
    a = ap.parse_args()
    cfg = {k: v for k, v in vars(a).items() if k != "port"}
    Handler.state = State(cfg)
    server = Server(("127.0.0.1", a.port), Handler)
    print(f"ready {server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
