#!/usr/bin/env bash
# The LLMCompiler shapes, ours and LangGraph's, against one scripted model
# server, side by side: writes docs/bench/plans-langgraph.md.
#
#   bench/langgraph/run.sh [RUNS TURN_MS PLANNER_MS TOOL_MS]
#
# Needs python3 with venv; installs langgraph and langchain-openai into
# target/langgraph-venv on first use (network needed once).
set -euo pipefail
runs=${1:-3} turn=${2:-200} planner=${3:-200} tool=${4:-500}
root=$(cd "$(dirname "$0")/../.." && pwd)
venv=${AIS_LANGGRAPH_VENV:-$root/target/langgraph-venv}
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q langgraph langchain-openai
fi
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
python3 "$root/bench/langgraph/model_server.py" "$port" "$turn" "$planner" &
server=$!
trap 'kill $server 2>/dev/null || true' EXIT
for _ in $(seq 50); do
  curl -s -o /dev/null "http://127.0.0.1:$port/" && break || sleep 0.1
done
url="http://127.0.0.1:$port/v1"
out=$(mktemp)
"$venv/bin/python" "$root/bench/langgraph/plans.py" "$url" "$runs" "$tool" "$out"
cd "$root"
cargo run --release -q -p ais-bench -- plans --runs "$runs" --turn-ms "$turn" \
  --planner-ms "$planner" --tool-ms "$tool" --model-url "$url" --baseline "$out" \
  --out docs/bench/plans-langgraph.md
