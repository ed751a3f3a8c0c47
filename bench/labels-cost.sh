#!/usr/bin/env bash
# What information-flow labels cost on the scheduler benchmark, in
# instructions (docs/security.md, "Cost").
#
# Wall-clock medians on a shared 2-core machine move by more than the 10 %
# being measured, so this counts instructions under valgrind's cachegrind,
# which are the same from run to run. Each case runs with 1 and with
# 1 + REPS repetitions; the difference divided by REPS is the instructions
# of one run, with the program's construction and the process start
# subtracted out. Labels on is the default policy (`enforce`); off is
# `mode = "off"`, which skips all label work.
#
# Usage: bench/labels-cost.sh            (needs valgrind; ~2 minutes)
set -euo pipefail
cd "$(dirname "$0")/.."
command -v valgrind >/dev/null || { echo "labels-cost: valgrind is not installed" >&2; exit 2; }

bin=$(cargo bench -p ais-vm --bench vm_scheduler --no-run --message-format=json 2>/dev/null |
    python3 -c 'import json,sys
for l in sys.stdin:
    m = json.loads(l)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == "vm_scheduler" and m.get("executable"):
        print(m["executable"])')
[ -x "$bin" ] || { echo "labels-cost: could not build the vm_scheduler bench" >&2; exit 2; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# instructions FILTER RECORD POLICY REPS -> total instructions of the process
instructions() {
    VM_BENCH_FILTER="$1" VM_BENCH_RECORD="$2" VM_BENCH_POLICY="$3" VM_BENCH_REPS="$4" \
        VM_BENCH_WORKERS=1 valgrind --tool=cachegrind --cache-sim=no \
        --cachegrind-out-file="$tmp/cg.out" "$bin" >"$tmp/out" 2>"$tmp/err"
    sed -n 's/.*I *refs: *\([0-9,]*\).*/\1/p' "$tmp/err" | tr -d ,
}

echo "| case | events | ops/run | instr/run labels off | labels on | cost |"
echo "|---|---|---:|---:|---:|---:|"
for case in "paper shape:5" "layered 1k:20" "layered 100k:2"; do
    IFS=: read -r filter reps <<<"$case"
    for record in off on; do
        declare -A per_run=()
        for policy in off on; do
            one=$(instructions "$filter" "$record" "$policy" 1)
            more=$(instructions "$filter" "$record" "$policy" $((reps + 1)))
            per_run[$policy]=$(((more - one) / reps))
        done
        # The bench's row: | graph | ops | workers | ...
        ops=$(awk -F'|' '$3 ~ /^ *[0-9]+ *$/ {gsub(/ /, "", $3); print $3; exit}' "$tmp/out")
        python3 - "$filter" "$record" "$ops" "${per_run[off]}" "${per_run[on]}" <<'EOF'
import sys
name, record, ops, off, on = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
print(f"| {name} | {record} | {ops} | {off:,} | {on:,} | {100 * (on - off) / off:+.1f} % |")
EOF
    done
done
