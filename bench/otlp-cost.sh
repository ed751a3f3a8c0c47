#!/usr/bin/env bash
# What OpenTelemetry export costs on the scheduler benchmark, in
# instructions (docs/benchmarks.md, "OpenTelemetry export").
#
# As bench/labels-cost.sh: cachegrind instruction counts, each case run with
# 1 and with 1 + REPS repetitions, the difference divided by REPS = one
# run. Events are recorded in every column (an observer turns recording on,
# and `aisc run` always has one: the kept telemetry); "noop" adds an
# observer that does nothing, "down" exports to a port nothing listens on,
# "slow" to a collector that takes requests and never answers. The cost
# column compares export with the no-op observer.
#
# Usage: bench/otlp-cost.sh            (needs valgrind; a few minutes)
#        OTLP_COST_BIN=path bench/otlp-cost.sh   (measure that vm_scheduler
#        bench binary instead of building this tree's: a before/after pair)
set -euo pipefail
cd "$(dirname "$0")/.."
command -v valgrind >/dev/null || { echo "otlp-cost: valgrind is not installed" >&2; exit 2; }

bin=${OTLP_COST_BIN:-}
[ -n "$bin" ] || bin=$(cargo bench -p ais-vm --bench vm_scheduler --no-run --message-format=json 2>/dev/null |
    python3 -c 'import json,sys
for l in sys.stdin:
    m = json.loads(l)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == "vm_scheduler" and m.get("executable"):
        print(m["executable"])')
[ -x "$bin" ] || { echo "otlp-cost: could not build the vm_scheduler bench" >&2; exit 2; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# instructions FILTER OTLP REPS -> total instructions of the process
instructions() {
    VM_BENCH_FILTER="$1" VM_BENCH_OTLP="$2" VM_BENCH_REPS="$3" VM_BENCH_RECORD=on \
        VM_BENCH_WORKERS=1 valgrind --tool=cachegrind --cache-sim=no \
        --cachegrind-out-file="$tmp/cg.out" "$bin" >"$tmp/out" 2>"$tmp/err"
    sed -n 's/.*I *refs: *\([0-9,]*\).*/\1/p' "$tmp/err" | tr -d ,
}

echo "| case | instr/run no observer | no-op observer | export, collector down | export, collector stuck | export cost (down / stuck vs no-op) |"
echo "|---|---:|---:|---:|---:|---:|"
for case in "paper shape:5" "layered 1k:20" "fan-out 64:3"; do
    IFS=: read -r filter reps <<<"$case"
    declare -A per_run=()
    for mode in off noop down slow; do
        one=$(instructions "$filter" "$mode" 1)
        more=$(instructions "$filter" "$mode" $((reps + 1)))
        per_run[$mode]=$(((more - one) / reps))
    done
    python3 - "$filter" "${per_run[off]}" "${per_run[noop]}" "${per_run[down]}" "${per_run[slow]}" <<'PY'
import sys
name, off, noop, down, slow = sys.argv[1], *map(int, sys.argv[2:])
print(f"| {name} | {off:,} | {noop:,} | {down:,} | {slow:,} | {100 * (down - noop) / noop:+.2f} % / {100 * (slow - noop) / noop:+.2f} % |")
PY
done
