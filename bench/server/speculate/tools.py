"""Issue 36's speculation of read-only tool calls: conditional routing
(w09_routing_tools.ais: an LLM classifier, then one of three arms whose
first op is a slow read-only tool, then a reply) against the independent
benchmark server (bench/server/server.py), ours with speculation
(`speculate = { ... }` in the config) and ours without it
(`--no-speculate`, same config), interleaved run by run, in the same
minutes.

The tool is a subprocess (`kb_search`, `sh kb.sh`) declared
`effect = "read-only"`: it takes `--tool-ms` and appends every call to a
log, so the benchmark counts the calls the tool itself received. The
server answers every prompt "Answer about: ...", which matches no case, so
every run takes the `default` arm; with speculation all three arms' calls
start with the classifier and the two others are discarded.

Reported per runtime: makespan, tool calls received (total), LLM requests,
speculation's figures (tool calls started / adopted / discarded, time
saved).

  python3 bench/server/speculate/tools.py [--runs N] [--p50-ms MS]
      [--tool-ms MS] [--max-extra-calls N] [--aisc PATH] [--out FILE]
"""
import argparse
import os
import statistics
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, os.path.dirname(HERE))

from bench import admin, start_server  # noqa: E402
from bench import ours as run_ours  # noqa: E402

PROGRAM = os.path.join(HERE, "w09_routing_tools.ais")
TICKETS = [
    "I was charged twice for my subscription this month.",
    "The app crashes when I open the settings page.",
    "Can you tell me who your CEO is?",
]


def project(port, tool_ms, calls, cost):
    """A directory with the tool script and the configuration."""
    d = tempfile.mkdtemp()
    log = os.path.join(d, "calls.log")
    script = os.path.join(d, "kb.sh")
    with open(script, "w") as f:
        f.write(f"""args=$(cat)
echo "$args" >> '{log}'
sleep {tool_ms / 1000.0:.3f}
echo '{{"articles": ["Refunds take 5 days.", "Restart the app after clearing its cache."]}}'
""")
    cfg = os.path.join(d, "bench.toml")
    with open(cfg, "w") as f:
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

[[tools.subprocess]]
name = "kb_search"
command = ["sh", "{script}"]
effect = "read-only"
output_schema = {{ type = "object" }}
input_schema = {{ type = "object", required = ["section", "ticket"], properties = {{ section = {{ type = "string" }}, ticket = {{ type = "string" }} }} }}

[access.allow]
SupportRouter = ["kb_search"]
""")
    return cfg, log


def tool_calls(log):
    try:
        with open(log) as f:
            return sum(1 for line in f if line.strip())
    except OSError:
        return 0


def ours(aisc, cfg, args, extra):
    r = run_ours(aisc, PROGRAM, cfg, args, extra=extra)
    return r["ok"], r["report"].get("summary", {}), r["stderr"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--p50-ms", type=float, default=200.0)
    ap.add_argument("--tool-ms", type=float, default=400.0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--max-extra-calls", type=int, default=2)
    ap.add_argument("--max-extra-cost", type=float, default=0.01)
    ap.add_argument("--aisc", default=os.path.join(ROOT, "target/debug/aisc"))
    ap.add_argument("--out")
    a = ap.parse_args()
    srv, port = start_server("--seed", str(a.seed), "--p50-ms", str(a.p50_ms), "--slow-frac", "0")
    cfg, log = project(port, a.tool_ms, a.max_extra_calls, a.max_extra_cost)
    modes = {"spec": [], "nospec": ["--no-speculate"]}
    res = {m: [] for m in modes}
    try:
        for i in range(a.runs):
            for m, extra in modes.items():
                args = {"ticket": TICKETS[i % len(TICKETS)]}
                before, tools_before = admin(port, "/admin/counters"), tool_calls(log)
                ok, s, err = ours(a.aisc, cfg, args, extra)
                after, tools_after = admin(port, "/admin/counters"), tool_calls(log)
                if not ok:
                    print(m, err, file=sys.stderr)
                    continue
                sp = s.get("speculation") or {}
                d = {
                    "ms": s.get("makespan_ms"),
                    "requests": after["requests"] - before["requests"],
                    "tool_calls": tools_after - tools_before,
                    "started": sp.get("tool_speculated", 0),
                    "adopted": sp.get("tool_adopted", 0),
                    "discarded": sp.get("tool_discarded", 0),
                    "saved_ms": sp.get("saved_ms", 0.0),
                }
                res[m].append(d)
                print(f"run {i + 1}/{a.runs} {m}: {d['ms']:.0f} ms, {d['tool_calls']} tool calls, "
                      f"{d['requests']} LLM requests", file=sys.stderr)
    finally:
        srv.kill()
        srv.wait()
    med = lambda m, k: statistics.median(x[k] for x in res[m])  # noqa: E731
    tot = lambda m, k: sum(x[k] for x in res[m])  # noqa: E731
    lines = [
        f"Server p50 {a.p50_ms:.0f} ms (no slow tail), seed {a.seed}; `kb_search` takes {a.tool_ms:.0f} ms "
        f"(a subprocess, `effect = \"read-only\"`); {a.runs} runs per runtime, interleaved; budget "
        f"max_extra_calls = {a.max_extra_calls}; medians per run unless totals.\n",
        "| runtime | makespan ms (median) | min / max ms | tool calls received (total) | LLM requests (total) "
        "| tool calls started / adopted / discarded (total) | saved ms (median) |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    label = {"spec": "ours, speculation", "nospec": "ours, `--no-speculate`"}
    for m in modes:
        xs = res[m]
        if not xs:
            continue
        lines.append(
            f"| {label[m]} | {med(m, 'ms'):.0f} | {min(x['ms'] for x in xs):.0f} / {max(x['ms'] for x in xs):.0f} "
            f"| {tot(m, 'tool_calls')} | {tot(m, 'requests')} "
            f"| {tot(m, 'started')} / {tot(m, 'adopted')} / {tot(m, 'discarded')} | {med(m, 'saved_ms'):.0f} |")
    if res["spec"] and res["nospec"]:
        cut = 1 - med("spec", "ms") / med("nospec", "ms")
        lines.append("")
        lines.append(f"Makespan {100 * cut:.0f} % lower with speculation (medians); extra tool calls per run: "
                     f"at most {max(x['discarded'] for x in res['spec'])} (budget {a.max_extra_calls}).")
    text = "\n".join(lines) + "\n"
    print(text)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
