#!/usr/bin/env bash
# Issue 36's resilience benchmarks (hedging, fallback) against the
# independent benchmark server, ours and LangGraph's: writes
# docs/bench/resilience.md.
#
#   bench/server/run.sh [--runs N] [--serve-runs N] [--p50-ms MS] [--aisc PATH] [--only fanout|outage]
#
# LangGraph rows need bench/langgraph/.venv (bash bench/langgraph/setup.sh).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
exec python3 "$root/bench/server/bench.py" "$@"
