"""Fair admission in `aisc serve` (issue 36): 128 clients, half running a
one-call program, half a fifty-call one, against one server whose backend
(the benchmark server, bench/server/server.py) allows 16 calls in flight.
Measures the short runs' latency (POST /v1/runs?wait=true, client side)
alone (one client) and under the mix, with fair admission (least attained
service, the default), with the shared slots in arrival order
(AIS_SERVE_FAIR=fifo) and without shared slots (AIS_SERVE_FAIR=off). Writes
docs/bench/serve-fair.md.

`--short-clients K` sets how many of the clients run the short program
(default half): with 64 short clients the short runs alone keep more calls
waiting than the backend's 16 slots, so no admission order can hold them
near their solo latency; with 16 they alone do not saturate it, and what
the long runs add to their latency is the admission's doing.

Usage: python3 bench/server/fair_load.py [--aisc PATH] [--seconds S] [--clients N] [--short-clients K]
"""
import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import http.client

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
from bench import start_server, admin, pct  # noqa: E402


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def start_serve(aisc, cfg, mode, runs):
    port = free_port()
    env = dict(os.environ)
    env["AIS_SERVE_FAIR"] = mode
    env.pop("AIS_SERVE_TOKEN", None)
    p = subprocess.Popen([aisc, "serve", os.path.join(HERE, "fair/short.ais"), os.path.join(HERE, "fair/long.ais"),
                          "--config", cfg, "--listen", f"127.0.0.1:{port}", "--memory", ":memory:",
                          "--max-concurrent-runs", str(runs), "--http-threads", str(runs), "--queue", "4096"],
                         env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    for _ in range(600):
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            c.request("GET", "/health")
            if c.getresponse().status == 200:
                return p, port
        except OSError:
            time.sleep(0.1)
    p.kill()
    raise SystemExit("aisc serve did not start: " + (p.stderr.read() if p.stderr else ""))


def one_run(port, program, q):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    body = json.dumps({"program": program, "args": {"q": q}})
    t = time.perf_counter()
    c.request("POST", "/v1/runs?wait=true", body, {"Content-Type": "application/json"})
    r = c.getresponse()
    data = json.loads(r.read())
    ms = (time.perf_counter() - t) * 1000.0
    c.close()
    return ms, r.status, data.get("status"), phases(ms, data)


def phases(ms, data):
    """Where a run's latency went, from its timestamps (server clock, ms):
    waiting for an executor (created -> started), running (started ->
    ended; of which `llm_wait`: the longest an op waited in the run's
    scheduler queue), and outside the run (the rest of the client's time:
    connection, request, setup before `created`, answer)."""
    try:
        queued = data["started_ms"] - data["created_ms"]
        running = data["ended_ms"] - data["started_ms"]
        wait = data.get("summary", {}).get("max_queue_wait_ms", 0.0)
        return queued, running, wait, ms - (data["ended_ms"] - data["created_ms"])
    except (KeyError, TypeError):
        return None


def load(port, clients, shorts, seconds, longs=True, warmup=0.0):
    """`clients` clients, the first `shorts` looping on the short program,
    the others on the long one (`longs=False`: those idle: the short runs
    alone). Runs sent in the first `warmup` seconds are not counted: the
    long clients' first runs all start at once, and each has attained no
    service yet, as a short run has not."""
    counted = time.monotonic() + warmup
    stop = counted + seconds
    short, long_, bad, short_phases = [], [], [], []
    lock = threading.Lock()

    def client(i):
        prog = "short" if i < shorts else "long"
        n = 0
        while time.monotonic() < stop:
            sent = time.monotonic()
            ms, st, status, ph = one_run(port, prog, f"c{i} r{n}")
            n += 1
            if sent < counted:
                continue
            with lock:
                if status != "succeeded":
                    bad.append((prog, st, status))
                (short if prog == "short" else long_).append(ms)
                if prog == "short" and ph is not None:
                    short_phases.append(ph)

    ts = [threading.Thread(target=client, args=(i,)) for i in range(clients) if longs or i < shorts]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return short, long_, bad, short_phases


def phase_text(ph):
    """p50 / p99 of each phase of the short runs, ms."""
    if not ph:
        return "-"
    cols = list(zip(*ph))
    return " · ".join(f"{pct(c, 0.5):.0f} / {pct(c, 0.99):.0f}" for c in cols)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--aisc", default=os.path.join(ROOT, "target/debug/aisc"))
    ap.add_argument("--seconds", type=float, default=30)
    ap.add_argument("--clients", type=int, default=128)
    ap.add_argument("--short-clients", type=int, default=None,
                    help="how many clients run the short program (default: half)")
    ap.add_argument("--warmup", type=float, default=0,
                    help="seconds of load before the measured ones (their runs are not counted)")
    ap.add_argument("--p50-ms", type=float, default=50)
    ap.add_argument("--out", default=os.path.join(ROOT, "docs/bench/serve-fair.md"))
    ap.add_argument("--modes", default="las,fifo,off", help="admission modes to measure, in order")
    a = ap.parse_args()
    shorts = a.clients // 2 if a.short_clients is None else max(0, min(a.short_clients, a.clients))
    srv, sport = start_server("--p50-ms", str(a.p50_ms), "--slow-frac", "0")
    d = tempfile.mkdtemp()
    cfg = os.path.join(d, "c.toml")
    with open(cfg, "w") as f:
        f.write(f"""[[llm_backends]]
name = "bench"
protocol = "openai"
base_url = "http://127.0.0.1:{sport}/v1"
concurrency = 16
stream = false
[llm_backends.models]
ask = "bench-ask"
""")
    rows = []
    try:
        for fair in a.modes.split(","):
            # `short-only`: least attained service with the long clients
            # idle: the short runs' own queueing (64 one-call runs at once
            # for 16 slots), the bound of any admission order.
            serve, port = start_serve(a.aisc, cfg, "las" if fair == "short-only" else fair, a.clients)
            try:
                solo_runs = [one_run(port, "short", f"solo {i}") for i in range(30)]
                solo = [r[0] for r in solo_runs]
                solo_phases = [r[3] for r in solo_runs if r[3] is not None]
                admin(sport, "/admin/reset", {})
                load_avg = os.getloadavg()[0]
                short, long_, bad, short_phases = load(port, a.clients, shorts, a.seconds, fair != "short-only", a.warmup)
                load_avg = (load_avg, os.getloadavg()[0])
                c = admin(sport, "/admin/counters")
            finally:
                serve.kill()
                serve.wait()
            s50, s99 = pct(solo, 0.5), pct(solo, 0.99)
            m50, m99 = pct(short, 0.5), pct(short, 0.99)
            rows.append((fair, s50, s99, len(short), m50, m99, len(long_), pct(long_, 0.5) if long_ else 0, pct(long_, 0.99) if long_ else 0,
                         c["in_flight_peak"], len(bad), phase_text(solo_phases), phase_text(short_phases),
                         load_avg))
            print(rows[-1], file=sys.stderr)
    finally:
        srv.kill()
        srv.wait()
    out = ["# Fair admission in `aisc serve` (issue 36)\n",
           f"Generated by `python3 bench/server/fair_load.py --seconds {a.seconds:g} --clients {a.clients} "
           f"--short-clients {shorts} --warmup {a.warmup:g}` on "
           f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} with `{os.path.relpath(a.aisc, ROOT)}`. "
           f"Benchmark server (bench/server/server.py): p50 {a.p50_ms:g} ms per call, no slow tail. "
           f"One `aisc serve` with `concurrency = 16` on its backend, `--max-concurrent-runs {a.clients}`; "
           f"{a.clients} keep-alive-less clients, {shorts} looping on a one-call program, {a.clients - shorts} on a "
           "fifty-call fan-out, `POST /v1/runs?wait=true`, latency at the client. Solo: 30 short runs, one client, "
           "same server.\n",
           "| admission | short solo p50 / p99 ms | short runs | short p50 / p99 ms | short p99 / solo p99 | long runs | long p50 / p99 ms | peak calls at the model server | failed runs | load average |",
           "|---|---|---:|---|---:|---:|---|---:|---:|---|"]
    for fair, s50, s99, ns, m50, m99, nl, l50, l99, peak, bad, _, _, (la0, la1) in rows:
        label = {"las": "least attained service, each run starting at the LLM calls it is sure to make (default)",
                 "las-uncounted": "least attained service from zero (`AIS_SERVE_FAIR=las-uncounted`)",
                 "fifo": "shared slots, arrival order (`AIS_SERVE_FAIR=fifo`)",
                 "off": "no shared slots: each run limits itself (`AIS_SERVE_FAIR=off`)",
                 "short-only": "the short clients alone (least attained service, long clients idle)"}[fair]
        long_text = f"{l50:.0f} / {l99:.0f}" if nl else "-"
        out.append(f"| {label} | {s50:.0f} / {s99:.0f} | {ns} | "
                   f"{m50:.0f} / {m99:.0f} | {m99 / s99:.2f} | {nl} | {long_text} | {peak} | {bad} | "
                   f"{la0:.1f} → {la1:.1f} |")
    out += ["",
            "Where a short run's time went (p50 / p99 ms of each phase, from the run's timestamps): "
            "waiting for an executor · running · of which the longest an op waited in its scheduler's "
            "queue · outside the run (connection, request, setup, answer).",
            "",
            "| admission | solo | under load |",
            "|---|---|---|"]
    for fair, *rest in rows:
        out.append(f"| {fair} | {rest[10]} | {rest[11]} |")
    text = "\n".join(out) + "\n"
    with open(a.out, "w") as f:
        f.write(text)
    print(text)


if __name__ == "__main__":
    main()
