"""Issue 36's resilience benchmarks against the independent benchmark
server (bench/server/server.py), ours and LangGraph's, same server, same
minutes. Run through bench/server/run.sh.

- fan-out: examples/04_scalability_n64.ais (64 asks) under heavy-tailed
  latency (p99 = 10 x p50), each run a fresh `aisc run` process, with
  hedging (`hedge = { after = "p95", max_extra = 0.1 }`) and without, and
  LangGraph's hand-parallel graph of the same workload
  (bench/langgraph/w04_scalability.py --n 64 --style par), interleaved.
  Reported: makespan p50 / p99 and their ratio, extra requests (the
  server's request count over the 64 calls).
- outage: bench/server/outage_chain.ais (15 calls) with the primary
  failing after its fifth answer; the fallback chain sends the rest to a
  spare (a second server process speaking the Anthropic protocol to us);
  LangGraph's equivalent uses `.with_fallbacks` (OpenAI protocol on the
  spare). Reported: completed, answers per server, answers repeated.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def start_server(*args):
    p = subprocess.Popen([sys.executable, os.path.join(HERE, "server.py"), "--port", "0", *args],
                         stdout=subprocess.PIPE, text=True)
    line = p.stdout.readline().split()
    if not line or line[0] != "ready":
        p.kill()
        raise SystemExit("the benchmark server did not start")
    return p, int(line[1])


def admin(port, path, body=None):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=data,
                                 method="GET" if body is None else "POST")
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.loads(r.read())


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, max(0, int(round(q * (len(xs) - 1)))))]


def ours(aisc, program, config, args, backend=None, memory=":memory:", extra=()):
    """One `aisc run`: whether it exited 0, its makespan, the end of its
    stderr and its report (shared by the benchmarks under bench/server)."""
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        report = f.name
    cmd = [aisc, "run", program, "--config", config, "-q", "--memory", memory, "--report-json", report,
           *extra]
    if backend:
        cmd += ["--backend", backend]
    for k, v in args.items():
        cmd += ["--arg", f"{k}={v}"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    try:
        with open(report) as f:
            rep = json.load(f)
    except (OSError, ValueError):
        rep = {}
    os.unlink(report)
    s = rep.get("summary", {})
    return {"ok": p.returncode == 0, "ms": s.get("makespan_ms"), "stderr": p.stderr[-400:], "report": rep}


def langgraph(py, script, *args):
    p = subprocess.run([py, os.path.join(ROOT, script), *args], capture_output=True, text=True, timeout=600)
    try:
        out = json.loads(p.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        out = {"ok": False, "error": p.stderr[-400:]}
    return out


def config(path, port, hedge, extra=""):
    h = 'hedge = { after = "p95", max_extra = 0.1 }\n' if hedge else ""
    with open(path, "w") as f:
        f.write(f"""[[llm_backends]]
name = "bench"
protocol = "openai"
base_url = "http://127.0.0.1:{port}/v1"
concurrency = 64
stream = false
retries = 0
{h}{extra}[llm_backends.models]
ask = "bench-ask"
think = "bench-think"
reason = "bench-reason"
""")


def serve_runs(a, cfg, prog, topic, port):
    """The hedged fan-out as runs of one `aisc serve` (after 5 warm-up
    runs), so hedges use the latency history of earlier runs."""
    import http.client
    import socket
    sk = socket.socket()
    sk.bind(("127.0.0.1", 0))
    sport = sk.getsockname()[1]
    sk.close()
    env = dict(os.environ)
    env.pop("AIS_SERVE_TOKEN", None)
    p = subprocess.Popen([a.aisc, "serve", prog, "--config", cfg, "--listen", f"127.0.0.1:{sport}",
                          "--memory", ":memory:"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    ms, extra = [], []
    try:
        for _ in range(600):
            try:
                c = http.client.HTTPConnection("127.0.0.1", sport, timeout=5)
                c.request("GET", "/health")
                if c.getresponse().status == 200:
                    break
            except OSError:
                time.sleep(0.1)
        for i in range(a.serve_runs + 5):
            before = admin(port, "/admin/counters")["requests"]
            c = http.client.HTTPConnection("127.0.0.1", sport, timeout=600)
            c.request("POST", "/v1/runs?wait=true", json.dumps({"program": os.path.basename(prog), "args": topic}),
                      {"Content-Type": "application/json"})
            run = json.loads(c.getresponse().read())
            after = admin(port, "/admin/counters")["requests"]
            if i >= 5 and run.get("status") == "succeeded":
                ms.append(run["summary"]["makespan_ms"])
                extra.append(after - before - 64)
    finally:
        p.kill()
        p.wait()
    return ms, extra


def fan_out(a, py, out):
    srv, port = start_server("--seed", str(a.seed), "--p50-ms", str(a.p50_ms), "--slow-frac", "0.02")
    try:
        d = tempfile.mkdtemp()
        hedged, plain = os.path.join(d, "hedged.toml"), os.path.join(d, "plain.toml")
        config(hedged, port, True)
        config(plain, port, False)
        prog = os.path.join(ROOT, "examples/04_scalability_n64.ais")
        topic = {"topic": "urban cycling infrastructure"}
        # Fresh processes sharing a memory directory: the hedge's latency
        # history is kept there (`latency.json`) from one run to the next.
        memdir = os.path.join(d, "memory")
        res = {"hedged": [], "history": [], "plain": [], "langgraph": []}
        extra = {"hedged": [], "history": [], "plain": [], "langgraph": []}
        for i in range(a.runs):
            for name in ("hedged", "history", "plain", "langgraph"):
                if name == "langgraph" and not py:
                    continue
                before = admin(port, "/admin/counters")["requests"]
                if name == "langgraph":
                    r = langgraph(py, "bench/langgraph/w04_scalability.py", "--n", "64", "--style", "par",
                                  "--base-url", f"http://127.0.0.1:{port}/v1", "--args", json.dumps(topic))
                    ok, ms = r.get("ok"), r.get("in_process_ms")
                else:
                    r = ours(a.aisc, prog, plain if name == "plain" else hedged, topic,
                             memory=memdir if name == "history" else ":memory:")
                    ok, ms = r["ok"], r["ms"]
                    if not ok:
                        print(name, r["stderr"], file=sys.stderr)
                after = admin(port, "/admin/counters")["requests"]
                if ok and ms is not None:
                    res[name].append(ms)
                    extra[name].append(after - before - 64)
            print(f"run {i + 1}/{a.runs}: " + ", ".join(
                f"{k} {v[-1]:.0f} ms" for k, v in res.items() if v), file=sys.stderr)
        if a.serve_runs:
            served = serve_runs(a, hedged, prog, topic, port)
            res["served"], extra["served"] = served
        c = admin(port, "/admin/counters")
    finally:
        srv.kill()
        srv.wait()
    rows = []
    for name, label in (("hedged", "ours, hedged (p95, max_extra 0.1), `--memory :memory:` (no latency history)"),
                        ("history", "ours, hedged, fresh `aisc run` per run, latency history in the memory directory"),
                        ("plain", "ours, no hedging"),
                        ("langgraph", "LangGraph (hand-parallel, `Send`)"),
                        ("served", "ours, hedged, runs of one `aisc serve` (latency history kept)")):
        xs = res.get(name)
        if not xs:
            continue
        p50, p99 = pct(xs, 0.5), pct(xs, 0.99)
        ex = sum(extra[name]) / (64.0 * len(extra[name]))
        rows.append(f"| {label} | {len(xs)} | {p50:.0f} | {p99:.0f} | {p99 / p50:.2f} | {max(xs):.0f} | {100 * ex:.1f} % |")
    out.append("## 64-way fan-out under heavy-tailed latency\n")
    out.append(f"Server: p50 {a.p50_ms:.0f} ms, 2 % of requests around 10 × p50 (observed over the whole "
               f"session: p50 {c['latency_p50_ms']:.0f} ms, p99 {c['latency_p99_ms']:.0f} ms, "
               f"{c['requests']} requests, {c['abandoned']} replies abandoned by a cancelled hedge), seed {a.seed}. "
               f"{a.runs} runs of each, interleaved; makespan from each run's report (ours) or "
               f"`graph.invoke` (LangGraph), in ms.\n")
    out.append("| runtime | runs | makespan p50 | p99 | p99 / p50 | max | extra requests |")
    out.append("|---|---:|---:|---:|---:|---:|---:|")
    out.extend(rows)
    out.append("")
    return res, extra


def outage(a, py, out):
    results = []
    for who in ("ours", "langgraph"):
        if who == "langgraph" and not py:
            continue
        prim, pport = start_server("--seed", str(a.seed), "--p50-ms", "50", "--slow-frac", "0",
                                   "--outage-after", "5")
        spare, sport = start_server("--seed", str(a.seed + 1), "--p50-ms", "50", "--slow-frac", "0")
        try:
            d = tempfile.mkdtemp()
            cfg = os.path.join(d, "outage.toml")
            with open(cfg, "w") as f:
                f.write(f"""default_backend = "primary"
[[llm_backends]]
name = "primary"
protocol = "openai"
base_url = "http://127.0.0.1:{pport}/v1"
stream = false
retries = 1
backoff_ms = 50
fallback = ["spare"]
[llm_backends.models]
ask = "bench-ask"

[[llm_backends]]
name = "spare"
protocol = "anthropic"
base_url = "http://127.0.0.1:{sport}"
stream = false
[llm_backends.models]
ask = "bench-ask"
""")
            if who == "ours":
                r = ours(a.aisc, os.path.join(HERE, "outage_chain.ais"), cfg, {"topic": "bees"})
                ok, ms, err = r["ok"], r["ms"], r["stderr"]
            else:
                r = langgraph(py, "bench/server/lg_outage.py", f"http://127.0.0.1:{pport}/v1",
                              f"http://127.0.0.1:{sport}/v1", "bees")
                ok, ms, err = r.get("ok"), r.get("in_process_ms"), r.get("error")
            cp, cs = admin(pport, "/admin/counters"), admin(sport, "/admin/counters")
            dp, ds = admin(pport, "/admin/completed"), admin(sport, "/admin/completed")
        finally:
            for p in (prim, spare):
                p.kill()
                p.wait()
        both = set(dp) & set(ds)
        repeated = sum(1 for n in list(dp.values()) + list(ds.values()) if n > 1) + len(both)
        results.append((who, ok, ms, cp, cs, repeated, err))
    out.append("## A provider outage mid-run\n")
    out.append("`bench/server/outage_chain.ais` (six dependent asks, an eight-way fan-out, a summary: "
               "15 calls). The primary server takes five requests, then every request gets `503`; "
               "ours: `fallback = [\"spare\"]` (the spare speaks Anthropic's protocol), `retries = 1`; "
               "LangGraph: `ChatOpenAI(...).with_fallbacks([ChatOpenAI(spare)])`, `max_retries=1`.\n")
    out.append("| runtime | completed | makespan ms | primary: requests / answered / 503 | spare: answered | calls answered twice |")
    out.append("|---|---|---:|---|---:|---:|")
    for who, ok, ms, cp, cs, rep, err in results:
        out.append(f"| {who} | {'yes' if ok else 'no: ' + str(err)[:80]} | {ms if ms is None else round(ms)} | "
                   f"{cp['requests']} / {cp['answered']} / {cp['status'].get('503', 0)} | {cs['answered']} | {rep} |")
    out.append("")
    return results


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--aisc", default=os.path.join(ROOT, "target/debug/aisc"))
    ap.add_argument("--python", default=os.path.join(ROOT, "bench/langgraph/.venv/bin/python"))
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--p50-ms", type=float, default=100.0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--only", choices=["fanout", "outage"])
    ap.add_argument("--serve-runs", type=int, default=0,
                    help="also N hedged runs through one `aisc serve` (history kept across runs)")
    ap.add_argument("--out", default=os.path.join(ROOT, "docs/bench/resilience.md"))
    a = ap.parse_args()
    py = a.python if os.path.exists(a.python) else None
    if not py:
        print("note: no LangGraph venv (bash bench/langgraph/setup.sh): LangGraph rows skipped", file=sys.stderr)
    aisc = os.path.abspath(a.aisc)
    shown = os.path.relpath(aisc, ROOT) if aisc.startswith(ROOT + os.sep) else aisc
    start_load = os.getloadavg()[0]
    out = ["# Resilience benchmarks (issue 36): hedging and fallback\n",
           f"Generated by `bench/server/run.sh {' '.join(sys.argv[1:])}` on {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} "
           f"with `{shown}`; server `bench/server/server.py`. See docs/benchmarks.md.\n"]
    if a.only in (None, "fanout"):
        fan_out(a, py, out)
    if a.only in (None, "outage"):
        outage(a, py, out)
    # The machine is shared: its load is part of the figures.
    l1, l5, l15 = os.getloadavg()
    out.insert(2, f"Load average at the start: {start_load:.1f} (1 min); at the end: {l1:.1f} / {l5:.1f} / {l15:.1f} (1 / 5 / 15 min), "
                  f"{os.cpu_count()} CPUs.\n")
    text = "\n".join(out) + "\n"
    with open(a.out, "w") as f:
        f.write(text)
    print(text)


if __name__ == "__main__":
    main()
