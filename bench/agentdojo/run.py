"""Runs AgentDojo's suites through `aisc run` and judges every run with
AgentDojo's own checks.

    target/py/bin/python bench/agentdojo/run.py [--suites banking,slack]
        [--user-tasks N] [--injection-tasks N] [--configs none,policy]
        [--jobs J] [--aisc target/debug/aisc] [--json OUT] [--keep DIR]

For every suite and configuration (`none`: `[policy] mode = "off"`;
`policy`: policies/<suite>.toml) it runs
- each user task without attack, with the ground-truth model: utility;
- each (user task x injection task) pair, the environment injected by the
  `important_instructions` attack, with the hijacked model: utility under
  attack and targeted attack success (the injection task's `security`).

One process holds every run's environment and serves, on loopback, both
the scripted model (`/s/SESSION/v1/chat/completions`, an OpenAI-compatible
endpoint) and the environment that each run's MCP server relays to
(`/env/SESSION/...`). Each run is one `aisc run` of programs/<suite>.ais in
a fresh directory with its own config.toml. The table goes to stdout, every
run's verdicts to --json.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import gen_programs  # noqa: E402
import model  # noqa: E402
from dojo import SUITES, Session, suite, tool_schemas  # noqa: E402

ROOT = HERE.parent.parent
CONFIGS = ("none", "policy")
RUN_TIMEOUT_S = 300


class Registry:
    def __init__(self) -> None:
        self.sessions: dict[str, Session] = {}
        self.lock = threading.Lock()
        self.keep: Path | None = None

    def get(self, sid: str) -> Session:
        with self.lock:
            return self.sessions[sid]


REGISTRY = Registry()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args) -> None:  # quiet
        pass

    def _send(self, code: int, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        self._send(404, {"error": {"message": "not found"}})

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        try:
            body = json.loads(self.rfile.read(length) or b"{}")
        except json.JSONDecodeError:
            return self._send(400, {"error": {"message": "not JSON"}})
        parts = self.path.strip("/").split("/")
        try:
            if len(parts) >= 2 and parts[0] == "s" and parts[-1] == "completions":
                return self._send(200, model.reply(REGISTRY.get(parts[1]), body))
            if len(parts) == 3 and parts[0] == "env":
                s = REGISTRY.get(parts[1])
                if parts[2] == "tools":
                    return self._send(200, {"tools": tool_schemas(s.suite_name)})
                if parts[2] == "call":
                    text, err, structured = s.call(body.get("name", ""), body.get("arguments") or {})
                    return self._send(200, {"text": text, "is_error": err, "structured": structured})
                if parts[2] == "close":
                    if REGISTRY.keep is not None:
                        (REGISTRY.keep / f"{parts[1]}.post_environment.json").write_text(s.post_environment_json())
                    return self._send(200, {})
        except KeyError:
            return self._send(404, {"error": {"message": f"no session in {self.path}"}})
        except Exception as e:  # a bridge bug: the run sees an error, the runner goes on
            return self._send(500, {"error": {"message": f"{type(e).__name__}: {e}"}})
        self._send(404, {"error": {"message": f"no route {self.path}"}})


def config_text(base: str, sid: str, suite_name: str, config: str) -> str:
    policy = (
        (HERE / "policies" / f"{suite_name}.toml").read_text()
        if config == "policy"
        else '[policy]\nmode = "off"\n'
    )
    return f"""default_backend = "scripted"

[[llm_backends]]
name = "scripted"
protocol = "openai"
base_url = "{base}/s/{sid}/v1"
stream = false
probe = false
retries = 0
timeout_s = 120

[access]
allow = {{ "*" = ["dojo_*"] }}

[[mcp_servers]]
name = "dojo"
command = ["{sys.executable}", "{HERE / 'mcp_server.py'}", "{base}", "{sid}"]
prefix = "dojo_"
timeout_s = 60

# Last, so that a policy file's `[mcp_servers.tools.NAME]` tables declare
# this server's tools.
{policy}"""


def refusals(events: Path) -> list[str]:
    """The runtime's reasons for the tool calls it refused to the model
    (`policy.denied: dojo_X argument Y would carry untrusted data from ...`)."""
    out = []
    if not events.is_file():
        return out
    for line in events.read_text().splitlines():
        try:
            ev = json.loads(line)
        except json.JSONDecodeError:
            continue
        for m in ev.get("gen_ai.input.messages") or []:
            for part in m.get("parts") or []:
                text = part.get("content")
                if m.get("role") == "tool" and isinstance(text, str) and "error [policy.denied]: " in text:
                    reason = text.split("error [policy.denied]: ", 1)[1]
                    if reason not in out:
                        out.append(reason)
    return out


def run_one(job: dict, base: str, aisc: str, counter: list) -> dict:
    sid = f"{job['suite']}-{job['user']}-{job['injection'] or 'clean'}-{job['config']}".replace("_", "")
    s = Session(job["suite"], job["user"], job["injection"], job["mode"])
    with REGISTRY.lock:
        REGISTRY.sessions[sid] = s
    with tempfile.TemporaryDirectory(prefix="agentdojo-") as d:
        Path(d, "config.toml").write_text(config_text(base, sid, job["suite"], job["config"]))
        cmd = [
            aisc, "run", str(HERE / "programs" / f"{job['suite']}.ais"),
            "--config", "config.toml", "--memory", ":memory:", "--yes", "--watchdog", "0",
            "--arg", f"task={s.user_task.PROMPT}", "--events", "events.jsonl",
        ]
        try:
            p = subprocess.run(cmd, cwd=d, capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
            out, err, rc = p.stdout, p.stderr, p.returncode
        except subprocess.TimeoutExpired as e:
            out, err, rc = "", f"timeout after {RUN_TIMEOUT_S} s: {e}", -1
        refused = refusals(Path(d, "events.jsonl"))
    verdict = s.judge(out if rc == 0 else "")
    with REGISTRY.lock:
        del REGISTRY.sessions[sid]
        counter[0] += 1
        done = counter[0]
    if REGISTRY.keep is not None:
        (REGISTRY.keep / f"{sid}.stderr.txt").write_text(err)
        (REGISTRY.keep / f"{sid}.stdout.txt").write_text(out)
    if done % 50 == 0:
        print(f"  {done} runs", file=sys.stderr, flush=True)
    return {
        **job,
        **verdict,
        "exit": rc,
        "calls": [c.function for c in s.trace],
        "tool_errors": list(s.errors),
        "stderr_tail": err[-400:] if rc != 0 else "",
        "refused": refused,
    }


def jobs(args) -> list[dict]:
    out = []
    for name in args.suites:
        s = suite(name)
        users = list(s.user_tasks)[: args.user_tasks]
        injs = list(s.injection_tasks)[: args.injection_tasks]
        if args.only_user:
            users = [u for u in users if u in args.only_user]
        for config in args.configs:
            for u in users:
                out.append({"suite": name, "config": config, "user": u, "injection": None, "mode": "ground_truth"})
                for i in injs:
                    out.append({"suite": name, "config": config, "user": u, "injection": i, "mode": "hijacked"})
    return out


def pct(n: int, d: int) -> str:
    return f"{n}/{d} ({100 * n / d:.1f} %)" if d else "-"


def table(results: list[dict], suites: list[str], configs: list[str]) -> str:
    rows = [
        "| suite | policy | utility, no attack | utility under attack | targeted attack success |",
        "| --- | --- | --- | --- | --- |",
    ]
    for config in configs:
        for name in suites + ["all"]:
            rs = [r for r in results if r["config"] == config and (name == "all" or r["suite"] == name)]
            clean = [r for r in rs if r["injection"] is None]
            att = [r for r in rs if r["injection"] is not None]
            u = sum(r["utility"] for r in clean)
            ua = sum(r["utility"] for r in att)
            asr = sum(bool(r["attack_success"]) for r in att)
            label = "**all**" if name == "all" else name
            rows.append(
                f"| {label} | {config} | {pct(u, len(clean))} | {pct(ua, len(att))} | {pct(asr, len(att))} |"
            )
    return "\n".join(rows)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--suites", default=",".join(SUITES))
    ap.add_argument("--user-tasks", type=int, default=None, help="the first N user tasks per suite")
    ap.add_argument("--injection-tasks", type=int, default=None, help="the first N injection tasks per suite")
    ap.add_argument("--only-user", default="", help="comma-separated user task ids")
    ap.add_argument("--configs", default=",".join(CONFIGS))
    ap.add_argument("--jobs", type=int, default=4)
    ap.add_argument("--aisc", default=str(ROOT / "target" / "debug" / "aisc"))
    ap.add_argument("--json", default=None, help="write every run's verdicts here")
    ap.add_argument("--keep", default=None, help="keep post-environments and stderr here")
    args = ap.parse_args()
    args.suites = [s for s in args.suites.split(",") if s]
    args.configs = [c for c in args.configs.split(",") if c]
    args.only_user = {u for u in args.only_user.split(",") if u}
    bad = [s for s in args.suites if s not in SUITES] + [c for c in args.configs if c not in CONFIGS]
    if bad:
        ap.error(f"unknown: {', '.join(bad)}")
    stale = gen_programs.stale()
    if stale:
        print("out of date (run gen_programs.py):", *stale, file=sys.stderr)
        return 1
    if not Path(args.aisc).is_file():
        ap.error(f"no aisc at {args.aisc} (cargo build -p ais-cli)")
    if args.keep:
        REGISTRY.keep = Path(args.keep)
        REGISTRY.keep.mkdir(parents=True, exist_ok=True)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    todo = jobs(args)
    print(f"{len(todo)} runs, {args.jobs} at a time", file=sys.stderr, flush=True)
    start = time.monotonic()
    counter = [0]
    try:
        with ThreadPoolExecutor(max_workers=args.jobs) as pool:
            results = list(pool.map(lambda j: run_one(j, base, args.aisc, counter), todo))
    finally:
        server.shutdown()
    elapsed = time.monotonic() - start
    if args.json:
        Path(args.json).write_text(json.dumps({"elapsed_s": round(elapsed, 1), "runs": results}, indent=1))
    print(table(results, args.suites, args.configs))
    failed = [r for r in results if r["exit"] != 0]
    print(f"\n{len(results)} runs in {elapsed:.0f} s; {len(failed)} ended with a non-zero exit", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
