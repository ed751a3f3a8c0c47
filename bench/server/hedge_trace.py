"""Where a hedged fan-out's time goes, run by run (issue 36, target 3).

Runs examples/04_scalability_n64.ais as a fresh `aisc run` per run, the
latency history kept in one memory directory (the "fresh `aisc run`"
row of docs/bench/resilience.md), against bench/server/server.py, and
prints for each run: its makespan (the report's, as bench.py takes it),
the requests the server counted beyond 64, the hedge credit the history
file held after it, and for every call with more than one request (or
the run's last call to finish) when each request was sent, how long it
was out, which answered, and when the call finished. Read from the run's
telemetry file (each attempt's latency and the hedge's note).

    python3 bench/server/hedge_trace.py [--runs 30] [--aisc target/debug/aisc]
"""
import argparse
import glob
import json
import os
import re
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402

SENT_AFTER = re.compile(r"sent after (\d+) ms")


def calls(telemetry):
    """Each LLM op of one run: start and end (ms from the run's start)
    and its requests (number, sent at ms after the call's start, ms out,
    outcome)."""
    out = []
    with open(telemetry) as f:
        for line in f:
            rec = json.loads(line)
            if rec.get("type") != "op" or not rec.get("attempts"):
                continue
            start, end = rec["start_ns"] / 1e6, rec["end_ns"] / 1e6
            reqs = []
            for a in rec["attempts"]:
                lat = a.get("latency_ms") or 0.0
                note = a.get("hedge") or ""
                m = SENT_AFTER.search(note)
                if a["number"] == 1:
                    sent = 0.0
                elif m:
                    sent = float(m.group(1))
                else:
                    # A cancelled request was out until the call ended.
                    sent = max(0.0, end - start - lat)
                won = a.get("error") is None
                reqs.append((a["number"], sent, lat, "won" if won else (a.get("error") or "?")))
            out.append({"op": rec["op"], "start": start, "end": end, "reqs": reqs})
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--aisc", default=os.path.join(bench.ROOT, "target/debug/aisc"))
    ap.add_argument("--p50-ms", type=float, default=100.0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--memory", help="memory directory to reuse (default: a fresh one)")
    a = ap.parse_args()
    srv, port = bench.start_server("--seed", str(a.seed), "--p50-ms", str(a.p50_ms), "--slow-frac", "0.02")
    ms_all, extra_all = [], []
    try:
        d = tempfile.mkdtemp()
        cfg = os.path.join(d, "hedged.toml")
        bench.config(cfg, port, True)
        mem = a.memory or os.path.join(d, "memory")
        os.makedirs(mem, exist_ok=True)
        prog = os.path.join(bench.ROOT, "examples/04_scalability_n64.ais")
        for i in range(a.runs):
            seen = set(glob.glob(os.path.join(mem, "telemetry", "*.jsonl")))
            before = bench.admin(port, "/admin/counters")["requests"]
            r = bench.ours(a.aisc, prog, cfg, {"topic": "urban cycling infrastructure"}, memory=mem)
            extra = bench.admin(port, "/admin/counters")["requests"] - before - 64
            if not r["ok"]:
                print(f"run {i + 1}: failed: {r['stderr']}")
                continue
            try:
                with open(os.path.join(mem, "latency.json")) as f:
                    credit = json.load(f).get("credit", {}).get("bench", 0) / 1e6
            except (OSError, ValueError):
                credit = float("nan")
            new = sorted(set(glob.glob(os.path.join(mem, "telemetry", "*.jsonl"))) - seen)
            cs = calls(new[-1]) if new else []
            ms_all.append(r["ms"])
            extra_all.append(extra)
            last = max(cs, key=lambda c: c["end"]) if cs else None
            ends = sorted(c["end"] for c in cs)
            second = ends[-2] if len(ends) > 1 else float("nan")
            print(f"run {i + 1}: makespan {r['ms']:.0f} ms, extra {extra}, credit after {credit:.1f}, "
                  f"calls done by {ends[len(ends) // 2] if ends else 0:.0f} (median) / {second:.0f} "
                  f"(second last) / {ends[-1] if ends else 0:.0f} ms (last)")
            for c in sorted(cs, key=lambda c: c["end"]):
                if len(c["reqs"]) > 1 or c is last:
                    legs = "; ".join(f"#{n} sent +{s:.0f} out {lat:.0f} {what}" for n, s, lat, what in c["reqs"])
                    print(f"    op {c['op']:3}: {c['start']:.0f} -> {c['end']:.0f} ms ({c['end'] - c['start']:.0f}): {legs}"
                          + ("   <- last" if c is last else ""))
    finally:
        srv.kill()
        srv.wait()
    if ms_all:
        p50, p99 = bench.pct(ms_all, 0.5), bench.pct(ms_all, 0.99)
        print(f"{len(ms_all)} runs: makespan p50 {p50:.0f} ms, p99 {p99:.0f} ms, p99/p50 {p99 / p50:.2f}, "
              f"extra requests {100 * sum(extra_all) / (64.0 * len(extra_all)):.1f} %")


if __name__ == "__main__":
    main()
