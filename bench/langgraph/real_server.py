"""aisc and the hand-parallel LangGraph graphs side by side against a real
model server (issue 34): llama.cpp's `llama-server` with SmolLM2-135M, the
tier `scripts/provision/llama.sh` provisions, at `--parallel 1` and `4`.

Both sides send the same completion limit and temperature 0 to the same
server, whole (not streamed) replies; each run is a fresh process (`aisc
run` / `python wNN.py --style par`), and the two alternate run by run so
the machine's load falls on both alike. Writes a markdown table.

    bench/langgraph/real_server.py --aisc target/release/aisc \\
        --runs 3 --max-tokens 32 --out docs/bench/real-server.md

Needs AIS_LLAMA_SERVER and AIS_LLAMA_MODEL (scripts/provision/llama.sh) and
bench/langgraph/.venv (bench/langgraph/setup.sh).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
TOPIC = "urban cycling infrastructure"

# (name, example, its arguments, LangGraph script, extra flags)
WORKLOADS = [
    ("1 Parallel Research", "01_parallel_research.ais", {"topic": "solid-state batteries"},
     "w01_parallel_research.py", []),
    ("4b Scalability N=4", "04_scalability_n4.ais", {"topic": TOPIC}, "w04_scalability.py", ["--n", "4"]),
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Llama:
    """A llama-server on a free loopback port with `parallel` slots."""

    def __init__(self, parallel: int, ctx_per_slot: int):
        self.port = free_port()
        self.log = tempfile.NamedTemporaryFile(prefix="llama-", suffix=".log", delete=False)
        self.proc = subprocess.Popen(
            [os.environ["AIS_LLAMA_SERVER"], "-m", os.environ["AIS_LLAMA_MODEL"],
             "--host", "127.0.0.1", "--port", str(self.port),
             "--parallel", str(parallel), "-c", str(ctx_per_slot * parallel),
             "--threads", "2", "--no-webui"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=self.log)
        for _ in range(6000):
            if self.proc.poll() is not None:
                raise SystemExit(f"llama-server exited: {Path(self.log.name).read_text()[-2000:]}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/health", timeout=5) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.1)
        self.stop()
        raise SystemExit("llama-server did not become healthy")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait()
        os.unlink(self.log.name)


def config(url: str, max_tokens: int) -> str:
    limits = "".join(f"{op} = {max_tokens}\n" for op in
                     ("ask", "think", "reason", "llm", "plan", "reflect", "verify", "solve"))
    return (f'default_backend = "llama"\n\n[[llm_backends]]\nname = "llama"\nprotocol = "openai"\n'
            f'base_url = "{url}"\ntemperature = 0\naccept_incomplete = true\nstream = false\n'
            f'retries = 0\n\n[max_tokens]\n{limits}')


def run_ais(aisc: str, cfg: Path, example: str, args: dict) -> dict:
    with tempfile.TemporaryDirectory() as d:
        report = Path(d) / "report.json"
        cmd = [aisc, "run", str(ROOT / "examples" / example), "--config", str(cfg),
               "--report-json", str(report)]
        for k, v in args.items():
            cmd += ["--arg", f"{k}={v}"]
        t0 = time.perf_counter()
        p = subprocess.run(cmd, cwd=d, capture_output=True, text=True,
                           env={k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "APXM_BACKEND")})
        wall = (time.perf_counter() - t0) * 1000.0
        rep = json.loads(report.read_text()) if report.exists() else {}
    s = rep.get("summary", {})
    return {"ok": p.returncode == 0 and rep.get("ok") is True, "wall_ms": wall,
            "calls": s.get("llm_calls"), "out_tokens": s.get("output_tokens"),
            "error": None if p.returncode == 0 else p.stderr.strip()[-300:]}


def run_langgraph(py: str, url: str, script: str, extra: list, args: dict, max_tokens: int) -> dict:
    cmd = [py, str(HERE / script), "--style", "par", "--base-url", url, "--args", json.dumps(args),
           "--max-tokens", str(max_tokens), "--temperature", "0", *extra]
    t0 = time.perf_counter()
    p = subprocess.run(cmd, cwd=HERE, capture_output=True, text=True)
    wall = (time.perf_counter() - t0) * 1000.0
    try:
        j = json.loads(p.stdout.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        j = {"ok": False, "error": p.stderr.strip()[-300:]}
    return {"ok": bool(j.get("ok")), "wall_ms": wall, "in_process_ms": j.get("in_process_ms"),
            "calls": j.get("llm_calls"), "out_tokens": j.get("output_tokens"), "error": j.get("error")}


def med(rows: list, key: str) -> float:
    vals = [r[key] for r in rows if r.get(key) is not None]
    return statistics.median(vals) if vals else float("nan")


def render(rows: list) -> str:
    """The markdown table of `(parallel, workload, aisc runs, LangGraph runs)`."""
    lines = [
        f"| `--parallel` | workload | aisc ok | LangGraph ok | LLM calls (aisc / LG) | output tokens (aisc / LG) "
        f"| aisc wall ms | LangGraph wall ms (in process) | LangGraph / aisc |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for parallel, name, ours, theirs in rows:
        ow, tw = med(ours, "wall_ms"), med(theirs, "wall_ms")
        lines.append(
            f"| {parallel} | {name} | {sum(r['ok'] for r in ours)}/{len(ours)} | "
            f"{sum(r['ok'] for r in theirs)}/{len(theirs)} | {med(ours, 'calls'):.0f} / {med(theirs, 'calls'):.0f} | "
            f"{med(ours, 'out_tokens'):.0f} / {med(theirs, 'out_tokens'):.0f} | {ow:.0f} | "
            f"{tw:.0f} ({med(theirs, 'in_process_ms'):.0f}) | {tw / ow:.2f}× |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--aisc", required=True)
    ap.add_argument("--python", default=str(HERE / ".venv" / "bin" / "python"))
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--parallel", default="1,4")
    ap.add_argument("--ctx-per-slot", type=int, default=2048)
    ap.add_argument("--out")
    a = ap.parse_args()
    rows = []
    raw = []
    for parallel in [int(x) for x in a.parallel.split(",")]:
        server = Llama(parallel, a.ctx_per_slot)
        try:
            with tempfile.TemporaryDirectory() as d:
                cfg = Path(d) / "config.toml"
                cfg.write_text(config(server.url, a.max_tokens))
                for name, example, args, script, extra in WORKLOADS:
                    ours, theirs = [], []
                    for i in range(a.runs):
                        # Alternate which goes first, so neither always
                        # meets a warm (or a busier) server.
                        pair = [lambda: ours.append(run_ais(a.aisc, cfg, example, args)),
                                lambda: theirs.append(run_langgraph(a.python, server.url, script, extra, args,
                                                                    a.max_tokens))]
                        for f in (pair if i % 2 == 0 else pair[::-1]):
                            f()
                    raw.append({"parallel": parallel, "workload": name, "aisc": ours, "langgraph": theirs})
                    print(json.dumps(raw[-1]), file=sys.stderr, flush=True)
                    rows.append((parallel, name, ours, theirs))
        finally:
            server.stop()
    table = render(rows)
    print(table)
    if a.out:
        Path(a.out).write_text(
            "# aisc and LangGraph on a real model server\n\n"
            "Written by `bench/langgraph/real_server.py` (medians of "
            f"{a.runs} runs each, completion limit {a.max_tokens} tokens, temperature 0, whole replies; "
            "wall = the whole process, `aisc run` or `python wNN.py --style par`).\n\n"
            + table + "\n\nEvery run:\n\n```json\n" + "\n".join(json.dumps(r) for r in raw) + "\n```\n")


if __name__ == "__main__":
    main()
