#!/bin/sh
# Runs per second and latency of a trivial program through a run server's
# "start a run and wait" endpoint at 1, 16 and 128 concurrent clients:
# `aisc serve` (journal on disk, the default; and --memory :memory:), and
# the LangGraph baseline (FastAPI + uvicorn around a one-node LangGraph
# graph, bench/serve/langgraph_server.py) with 1 and 2 uvicorn workers;
# and, when LANGGRAPH is set to a `langgraph` CLI with the in-memory
# runtime (pip install "langgraph-cli[inmem]"), LangGraph's own server
# (`langgraph dev`, bench/serve/langgraph.json + graph.py: the same graph)
# through its `POST /runs/wait`.
#
#   [LANGGRAPH=/path/to/venv/bin/langgraph] bench/serve/run.sh [SECONDS] [PYTHON]
#
# SECONDS: measured seconds per level (default 10, after 2 s of warm-up);
# PYTHON: a python with langgraph, fastapi and uvicorn (default
# /work/venvs/lg/bin/python). Needs the release build:
#   cargo build --release -p ais-cli -p ais-bench
set -eu
SECS=${1:-10}
PY=${2:-/work/venvs/lg/bin/python}
HERE=$(cd "$(dirname "$0")" && pwd)
BIN=${CARGO_TARGET_DIR:-$HERE/../../target}/release
uptime
"$BIN/ais-bench" serve-load --seconds "$SECS" --label "aisc serve (journal on disk)"
"$BIN/ais-bench" serve-load --seconds "$SECS" --label "aisc serve (--memory :memory:)" \
    --serve-arg=--memory --serve-arg=:memory: | tail -n +3
for W in 1 2; do
    PORT=$((18120 + W))
    (cd "$HERE" && exec "$PY" -m uvicorn langgraph_server:app --port $PORT --workers $W --log-level warning) &
    PID=$!
    i=0
    until "$PY" -c "import socket; socket.create_connection(('127.0.0.1', $PORT), 1)" 2>/dev/null; do
        i=$((i + 1)); [ $i -lt 100 ] || { kill $PID; echo "uvicorn did not start" >&2; exit 1; }
        sleep 0.2
    done
    "$BIN/ais-bench" serve-load --seconds "$SECS" --url "http://127.0.0.1:$PORT" \
        --path /runs/wait --body '{"input":{"topic":"x"}}' \
        --label "LangGraph + FastAPI, $W uvicorn worker(s)" | tail -n +3
    kill $PID
    wait $PID 2>/dev/null || true
done
if [ -n "${LANGGRAPH:-}" ]; then
    PORT=28124
    LOG=$(mktemp)
    (cd "$HERE" && LANGGRAPH_CLI_NO_ANALYTICS=1 LANGSMITH_TRACING=false \
        exec "$LANGGRAPH" dev --no-browser --no-reload --port $PORT >"$LOG" 2>&1) &
    PID=$!
    i=0
    until curl -s -o /dev/null "http://127.0.0.1:$PORT/ok"; do
        i=$((i + 1)); [ $i -lt 150 ] || { kill $PID; cat "$LOG" >&2; exit 1; }
        sleep 0.2
    done
    if grep -q "already in use" "$LOG"; then kill $PID; echo "port $PORT is taken" >&2; exit 1; fi
    "$BIN/ais-bench" serve-load --seconds "$SECS" --url "http://127.0.0.1:$PORT" \
        --path /runs/wait --body '{"assistant_id":"trivial","input":{"topic":"x"}}' \
        --status 200 --contains '"about x"' \
        --label "langgraph dev (in-memory runtime)" | tail -n +3
    kill $PID
    wait $PID 2>/dev/null || true
    rm -f "$LOG"
fi
uptime
