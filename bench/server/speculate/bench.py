"""Issue 36's speculation benchmark: conditional routing (an LLM classifier,
then one of three LLM arms; bench/server/cache/w09_routing_manual.ais)
against the independent benchmark server (bench/server/server.py), ours
with speculation (`speculate = { ... }` in the config) and ours without it
(`--no-speculate`, same config), interleaved run by run, in the same
minutes.

Reported per runtime: requests the server received, answered and
abandoned (replies to cancelled requests), the cost the server billed
(answered requests only, at its list prices), speculation's own figures
(calls adopted / discarded, extra cost the client saw) and makespan.
The server answers every prompt "Answer about: ...", which matches no case,
so every run takes the `default` arm; speculation starts all three arms
whichever is taken, so this costs it nothing it would not pay otherwise.

  python3 bench/server/speculate/bench.py [--runs N] [--p50-ms MS]
      [--max-extra-calls N] [--max-extra-cost USD] [--aisc PATH] [--out FILE]
"""
import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, os.path.dirname(HERE))

from bench import admin, start_server  # noqa: E402
from bench import ours as run_ours  # noqa: E402
from server import PRICES  # noqa: E402

PROGRAM = os.path.join(os.path.dirname(HERE), "cache", "w09_routing_manual.ais")
TICKETS = [
    "I was charged twice for my subscription this month.",
    "The app crashes when I open the settings page.",
    "Can you tell me who your CEO is?",
]
WORDS = ("refund invoice charge plan upgrade crash restart cache login password "
         "escalation policy contact hours response time warranty").split()


def make_manual(seed, tokens):
    r = random.Random(seed)
    out, n = [], 0
    while n < tokens * 4:
        s = " ".join(r.choice(WORDS) for _ in range(r.randint(8, 20))).capitalize() + "."
        out.append(s)
        n += len(s) + 1
    return " ".join(out)


def config(path, port, calls, cost):
    p = PRICES["openai"]
    with open(path, "w") as f:
        f.write(f"""speculate = {{ max_extra_calls = {calls}, max_extra_cost = {cost} }}

[[llm_backends]]
name = "bench"
protocol = "openai"
base_url = "http://127.0.0.1:{port}/v1"
concurrency = 16
stream = false
retries = 0
[llm_backends.models]
ask = "bench-ask"
think = "bench-think"
reason = "bench-reason"
[llm_backends.prices]
input_per_mtok = {p['input']}
output_per_mtok = {p['output']}
""")


def ours(aisc, cfg, args, extra):
    r = run_ours(aisc, PROGRAM, cfg, args, extra=extra)
    return r["ok"], r["report"].get("summary", {}), r["stderr"]


def langgraph(py, port, args):
    """LangGraph's equivalent (bench/server/cache/lg_cache.py w09): the
    classifier node, then a conditional edge to one arm node."""
    p = subprocess.run([py, os.path.join(os.path.dirname(HERE), "cache", "lg_cache.py"), "w09",
                        "--style", "par", "--base-url", f"http://127.0.0.1:{port}/v1",
                        "--args", json.dumps(args)], capture_output=True, text=True, timeout=600)
    try:
        out = json.loads(p.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        return False, None, p.stderr[-400:]
    return bool(out.get("ok")), out.get("in_process_ms"), p.stderr[-400:]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--p50-ms", type=float, default=200.0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--doc-tokens", type=int, default=1000)
    ap.add_argument("--max-extra-calls", type=int, default=2)
    ap.add_argument("--max-extra-cost", type=float, default=0.01)
    ap.add_argument("--aisc", default=os.path.join(ROOT, "target/debug/aisc"))
    ap.add_argument("--out")
    a = ap.parse_args()
    srv, port = start_server("--seed", str(a.seed), "--p50-ms", str(a.p50_ms), "--slow-frac", "0")
    cfg = os.path.join(tempfile.mkdtemp(), "bench.toml")
    config(cfg, port, a.max_extra_calls, a.max_extra_cost)
    py = os.path.join(ROOT, "bench/langgraph/.venv/bin/python")
    modes = {"spec": [], "nospec": ["--no-speculate"]}
    if os.path.exists(py):
        modes["langgraph"] = None
    res = {m: [] for m in modes}
    try:
        for i in range(a.runs):
            for m, extra in modes.items():
                args = {"ticket": TICKETS[i % len(TICKETS)],
                        "manual": make_manual(f"{m}-{i}", a.doc_tokens)}
                before = admin(port, "/admin/counters")
                if extra is None:
                    ok, ms, err = langgraph(py, port, args)
                    s = {"makespan_ms": ms}
                else:
                    ok, s, err = ours(a.aisc, cfg, args, extra)
                after = admin(port, "/admin/counters")
                if not ok:
                    print(m, err, file=sys.stderr)
                    continue
                d = {k: after[k] - before[k] for k in ("requests", "answered", "abandoned", "cost_usd")}
                d["ms"] = s.get("makespan_ms")
                d["summary_cost"] = s.get("cost_usd", 0.0)
                sp = s.get("speculation") or {}
                for k in ("speculated", "adopted", "discarded", "extra_cost_usd", "saved_ms"):
                    d[k] = sp.get(k, 0)
                res[m].append(d)
                print(f"run {i + 1}/{a.runs} {m}: {d['ms']:.0f} ms, {d['requests']} requests "
                      f"({d['abandoned']} abandoned), server ${d['cost_usd'] * 1000:.3f}/1k", file=sys.stderr)
    finally:
        srv.kill()
        srv.wait()
    med = lambda m, k: statistics.median(x[k] for x in res[m])  # noqa: E731
    tot = lambda m, k: sum(x[k] for x in res[m])  # noqa: E731
    lines = [
        f"Server p50 {a.p50_ms:.0f} ms (no slow tail), seed {a.seed}, openai protocol and prices, "
        f"a ~{a.doc_tokens}-token manual per run, {a.runs} runs per runtime, interleaved; "
        f"budget max_extra_calls = {a.max_extra_calls}, max_extra_cost = ${a.max_extra_cost}; "
        "medians per run unless totals.\n",
        "| runtime | makespan ms (median) | min / max ms | requests (total) | answered | abandoned "
        "| server-billed $/1k runs | client-counted $/1k runs | adopted / discarded (total) | extra cost seen $/1k runs |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    label = {"spec": "ours, speculation", "nospec": "ours, `--no-speculate`",
             "langgraph": "LangGraph (conditional edge)"}
    for m in modes:
        xs = res[m]
        if not xs:
            continue
        n = len(xs)
        lines.append(
            f"| {label[m]} | {med(m, 'ms'):.0f} | {min(x['ms'] for x in xs):.0f} / {max(x['ms'] for x in xs):.0f} "
            f"| {tot(m, 'requests')} | {tot(m, 'answered')} | {tot(m, 'abandoned')} "
            f"| {tot(m, 'cost_usd') / n * 1000:.3f} | {tot(m, 'summary_cost') / n * 1000:.3f} "
            f"| {tot(m, 'adopted')} / {tot(m, 'discarded')} | {tot(m, 'extra_cost_usd') / n * 1000:.3f} |")
    if res["spec"] and res["nospec"]:
        cut = 1 - med("spec", "ms") / med("nospec", "ms")
        extra_calls = max(x["discarded"] for x in res["spec"])
        per_call = tot("nospec", "cost_usd") / max(1, tot("nospec", "answered"))
        worst = statistics.mean(x["discarded"] for x in res["spec"]) * per_call
        lines.append("")
        lines.append(f"Makespan {100 * cut:.0f} % lower with speculation (medians). Extra calls per run: "
                     f"at most {extra_calls} (budget {a.max_extra_calls}). If every discarded call were "
                     f"billed in full: ${worst * 1000:.3f}/1k runs extra "
                     f"(budget ${a.max_extra_cost * 1000:.0f}/1k runs).")
    text = "\n".join(lines) + "\n"
    print(text)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
