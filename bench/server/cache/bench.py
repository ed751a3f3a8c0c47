"""Issue 36's prompt-caching benchmark: the paper's workloads with a
shared context of ~3k tokens (bench/server/cache/*.ais), ours with the
`cache-layout` pass (-O1), ours without it (the -O1 pipeline minus
`cache-layout`) and LangGraph's equivalents (lg_cache.py), against the
independent benchmark server (bench/server/server.py), interleaved, in the
same minutes.

Every run gets a document of its own (same size, different text), so no
run reads what another wrote: the cache hits counted are within a run
(`--same-doc`: one document for every run, as a manual that does not
change between requests). Ours runs with the backend's `cache_warmup`
at its default (auto) and at each other setting of `--warmup`.
Reported per workload and runtime: input tokens, of them read from the
cache and written to it, input cost (the server's prices), calls held by
the warm-up, makespan; and whether our run reports counted the same
tokens as the server.

  python3 bench/server/cache/bench.py [--runs N] [--p50-ms MS] [--aisc PATH]
      [--protocol openai|anthropic] [--doc-tokens N] [--only w01,w09,w10,w12]
      [--warmup auto,off,always] [--same-doc]
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
from server import PRICES  # noqa: E402

WORKLOADS = {
    "w01": ("w01_research_doc.ais", "Parallel research over a document (5 calls)",
            lambda doc: {"topic": "solid-state batteries", "doc": doc}),
    "w09": ("w09_routing_manual.ais", "Conditional routing with a manual (2 calls)",
            lambda doc: {"ticket": "I was charged twice for my subscription this month.", "manual": doc}),
    "w10": ("w10_review_doc.ais", "Review pipeline over a contract (6 calls, 5 after fusion)",
            lambda doc: {"task": "a one-page brief for the board", "doc": doc}),
    "w12": ("w12_fanout_doc.ais", "Fan-out over a document, nothing before it (4 calls)",
            lambda doc: {"topic": "the supply contract", "doc": doc}),
}
# Workloads lg_cache.py has an equivalent of.
LANGGRAPH = {"w01", "w09", "w10"}
WORDS = ("clause party notice payment term renewal liability warranty delivery service level "
         "breach remedy audit data privacy invoice currency schedule milestone acceptance "
         "termination dispute arbitration confidentiality indemnity insurance").split()
NO_PASS = "canonicalize,fuse-ask,cse,dce"


def make_doc(seed, tokens):
    r = random.Random(seed)
    out, n = [], 0
    section = 1
    while n < tokens * 4:
        sent = " ".join(r.choice(WORDS) for _ in range(r.randint(8, 20))).capitalize() + "."
        if r.random() < 0.08:
            sent = f"\n\nSection {section}. " + sent
            section += 1
        out.append(sent)
        n += len(sent) + 1
    return " ".join(out)


def config(path, port, protocol, warmup="auto"):
    base = f"http://127.0.0.1:{port}" + ("/v1" if protocol == "openai" else "")
    with open(path, "w") as f:
        f.write(f"""[[llm_backends]]
name = "bench"
protocol = "{protocol}"
base_url = "{base}"
concurrency = 16
stream = false
retries = 0
cache_warmup = "{warmup}"
[llm_backends.models]
ask = "bench-ask"
think = "bench-think"
reason = "bench-reason"
""")


def ours_with(aisc, prog, cfg, args, extra):
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        report = f.name
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(args, f)
        args_file = f.name
    cmd = [aisc, "run", prog, "--config", cfg, "-q", "--memory", ":memory:", "--report-json", report,
           *extra]
    for k, v in args.items():
        cmd += ["--arg", f"{k}={v}"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    os.unlink(args_file)
    try:
        with open(report) as f:
            rep = json.load(f)
    except (OSError, ValueError):
        rep = {}
    os.unlink(report)
    return {"ok": p.returncode == 0, "ms": rep.get("summary", {}).get("makespan_ms"), "stderr": p.stderr[-400:],
            "summary": rep.get("summary", {})}


def report_agrees(summary, d):
    """Our run's own summary counts the tokens the server counted (input
    including cached and written, cached, written): usage is read, not
    guessed, in both protocols."""
    ours = (summary.get("input_tokens", 0), summary.get("cache_read_tokens", 0),
            summary.get("cache_write_tokens", 0))
    server = (d["input_tokens"] + d["cached_tokens"] + d["cache_write_tokens"], d["cached_tokens"],
              d["cache_write_tokens"])
    return ours == server, ours, server


def input_cost(c, proto):
    p = PRICES[proto]
    return (c["input_tokens"] * p["input"] + c["cached_tokens"] * p["cached"]
            + c["cache_write_tokens"] * p["write"]) / 1e6


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--p50-ms", type=float, default=200.0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--doc-tokens", type=int, default=3000)
    ap.add_argument("--protocol", choices=["openai", "anthropic"], default="openai")
    ap.add_argument("--aisc", default=os.path.join(ROOT, "target/debug/aisc"))
    ap.add_argument("--only", default="w01,w09,w10,w12")
    ap.add_argument("--same-doc", action="store_true",
                    help="one document per workload and runtime for every run (a manual that does not "
                         "change between requests): later runs read what earlier ones wrote")
    ap.add_argument("--warmup", default="auto,off",
                    help="cache_warmup settings to run ours with the pass under (auto, off, always)")
    ap.add_argument("--out")
    a = ap.parse_args()
    py = os.path.join(ROOT, "bench/langgraph/.venv/bin/python")
    if not os.path.exists(py) or a.protocol != "openai":
        py = None  # LangGraph's runtime here speaks OpenAI only
    srv, port = start_server("--seed", str(a.seed), "--p50-ms", str(a.p50_ms), "--slow-frac", "0")
    cfgdir = tempfile.mkdtemp()
    warmups = [w for w in a.warmup.split(",") if w]
    cfgs = {}
    for w in set(warmups) | {"auto"}:
        cfgs[w] = os.path.join(cfgdir, f"bench-{w}.toml")
        config(cfgs[w], port, a.protocol, w)
    # "pass": ours at -O1 with the default warm-up (auto); "pass-<w>": another setting.
    modes = ["pass"] + [f"pass-{w}" for w in warmups if w != "auto"] + ["nopass"] + (["langgraph"] if py else [])
    disagreements = []
    rows = {}
    try:
        for w in a.only.split(","):
            prog, title, make_args = WORKLOADS[w]
            prog = os.path.join(HERE, prog)
            res = {m: [] for m in modes}
            for i in range(a.runs):
                for m in modes:
                    if m == "langgraph" and w not in LANGGRAPH:
                        continue
                    seed = f"{w}-{m}" if a.same_doc else f"{w}-{m}-{i}"
                    args = make_args(make_doc(seed, a.doc_tokens))
                    if a.same_doc:
                        # Same document, other requests: a run's prompts are its own.
                        for k in ("ticket", "topic", "task"):
                            if k in args:
                                args[k] += f" (request {i + 1})"
                    before = admin(port, "/admin/counters")
                    if m == "langgraph":
                        p = subprocess.run([py, os.path.join(HERE, "lg_cache.py"), w, "--style", "par",
                                            "--base-url", f"http://127.0.0.1:{port}/v1", "--args", json.dumps(args)],
                                           capture_output=True, text=True, timeout=600)
                        try:
                            out = json.loads(p.stdout.strip().splitlines()[-1])
                        except (IndexError, ValueError):
                            out = {"ok": False}
                            print(p.stderr[-600:], file=sys.stderr)
                        ok, ms = out.get("ok"), out.get("in_process_ms")
                    else:
                        cfg = cfgs[m[len("pass-"):]] if m.startswith("pass-") else cfgs["auto"]
                        r = ours_with(a.aisc, prog, cfg, args, ["--passes", NO_PASS] if m == "nopass" else [])
                        ok, ms = r["ok"], r["ms"]
                        if not ok:
                            print(m, r["stderr"], file=sys.stderr)
                    after = admin(port, "/admin/counters")
                    d = {k: after[k] - before[k] for k in ("input_tokens", "cached_tokens", "cache_write_tokens", "answered")}
                    if ok and m != "langgraph":
                        agrees, ours, server = report_agrees(r["summary"], d)
                        d["holds"] = r["summary"].get("cache_warmup_holds", 0)
                        if not agrees:
                            disagreements.append(f"{w} {m} run {i + 1}: ours {ours}, server {server}")
                    if ok and ms is not None:
                        d["ms"] = ms
                        d["cost"] = input_cost(d, a.protocol)
                        res[m].append(d)
                print(f"{w} run {i + 1}/{a.runs}: " + ", ".join(
                    f"{m} {v[-1]['ms']:.0f} ms ${v[-1]['cost'] * 1000:.3f}/1k" for m, v in res.items() if v), file=sys.stderr)
            rows[w] = (title, res)
    finally:
        srv.kill()
        srv.wait()
    lines = [f"Protocol {a.protocol}, server p50 {a.p50_ms:.0f} ms (no slow tail), seed {a.seed}, "
             f"a ~{a.doc_tokens}-token document {'per workload and runtime, the same in every run' if a.same_doc else 'per run'}, {a.runs} runs per runtime, interleaved; "
             f"cost in dollars per 1000 runs at the server's {a.protocol} prices; medians.\n",
             "| workload | runtime | calls | input tokens | cache reads | cache writes | input cost $/1k runs | vs without the pass | held | makespan ms |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    label = {"pass": "ours, `cache-layout` (-O1), warm-up auto", "nopass": "ours, without the pass",
             "langgraph": "LangGraph (prompt, then context)"}
    for w in warmups:
        label[f"pass-{w}"] = f"ours, `cache-layout` (-O1), warm-up {w}"
    summary = {}
    for w, (title, res) in rows.items():
        base = statistics.median(x["cost"] for x in res["nopass"]) if res.get("nopass") else None
        for m in modes:
            xs = res[m]
            if not xs:
                continue
            med = lambda k: statistics.median(x[k] for x in xs)  # noqa: E731
            cost = med("cost")
            rel = f"{100 * (cost / base - 1):+.0f} %" if base else ""
            holds = f"{med('holds'):.0f}" if m != "langgraph" else ""
            lines.append(f"| {title} | {label[m]} | {med('answered'):.0f} | {med('input_tokens') + med('cached_tokens') + med('cache_write_tokens'):.0f} | "
                         f"{med('cached_tokens'):.0f} | {med('cache_write_tokens'):.0f} | {cost * 1000:.3f} | {rel} | {holds} | {med('ms'):.0f} |")
            summary[f"{w}/{m}"] = {"cost": cost, "ms": med("ms")}
    lines.append("")
    if disagreements:
        lines.append("Our run reports disagree with the server's counters: " + "; ".join(disagreements))
    else:
        lines.append("Every run of ours reported the same input, cached and written tokens as the server counted.")
    text = "\n".join(lines) + "\n"
    print(text)
    print(json.dumps(summary))
    if a.out:
        with open(a.out, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
