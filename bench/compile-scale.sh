#!/usr/bin/env bash
# Compile time and memory against program size and shape (issue 40).
#
# For each shape (bench/src/shapes.rs: lets, plus, flows, deep, agents,
# branchy) and size (IR ops after lowering), writes the program with
# `ais-bench shape`, then runs `aisc check` and `aisc build -O1` under
# /usr/bin/time: CPU seconds (user + system, so a loaded machine does not
# inflate them the way wall time would) and peak RSS. Prints a markdown
# table: ops/CPU-s, bytes of peak RSS per op, and the CPU growth against
# the previous size (linear is 10× per 10×), and that growth per doubling
# of the ops (issue 40's target: ≤ 2.2×).
#
# Usage: [REPS=N] bench/compile-scale.sh [AISC] [SIZES] [SHAPES]
#   AISC    the aisc binary (default: target/release/aisc, built if absent)
#   SIZES   default "10000 100000 1000000"
#   SHAPES  default "lets plus flows deep agents branchy"
#   REPS    runs of each command per size, alternating check and build;
#           each figure is the median (default 1). The machine is shared:
#           one run to the next differs by 0.1–0.2× per doubling.
# Example: bench/compile-scale.sh target/release/aisc "10000 100000" "deep branchy"
set -euo pipefail
cd "$(dirname "$0")/.."
aisc=${1:-target/release/aisc}
sizes=${2:-"10000 100000 1000000"}
shapes=${3:-"lets plus flows deep agents branchy"}
reps=${REPS:-1}
if [ ! -x "$aisc" ]; then
    nice cargo build --release -p ais-cli --bin aisc >&2
fi
# The generator is the debug ais-bench (fast enough; a release build of the
# bench tool costs more than it saves).
gen=target/debug/ais-bench
[ -x "$gen" ] || cargo build -p ais-bench >&2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# measure CMD... -> "cpu_seconds peak_kib exit"
measure() {
    local out
    out=$( { /usr/bin/time -f "%U %S %M %x" "$@" >/dev/null 2>"$tmp/err"; } 2>&1 || true)
    # A crash shows as "Command terminated by signal N" (and %x is 0).
    local sig
    sig=$(sed -n 's/^Command terminated by signal \([0-9]*\)/\1/p' "$tmp/err")
    tail -n 1 "$tmp/err" | awk -v sig="$sig" '{printf "%.2f %d %d\n", $1 + $2, $3, (sig != "") ? 128 + sig : $4}'
}

# median FILE -> the median of each column of "cpu peak exit" lines (the
# worst exit status, so one crash shows).
median() {
    local n
    n=$(wc -l < "$1")
    for col in 1 2; do
        sort -g -k "$col,$col" "$1" | awk -v c="$col" -v m=$(( (n + 1) / 2 )) 'NR == m { printf "%s ", $c }'
    done
    sort -g -k 3,3 "$1" | tail -n 1 | awk '{ print $3 }'
}

echo "| shape | ops | check CPU s | check ops/s | check B/op | build -O1 CPU s | build ops/s | build B/op | build CPU × vs previous size |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|"
for shape in $shapes; do
    prev_cpu=""
    prev_ops=""
    for ops in $sizes; do
        "$gen" shape "$shape" "$ops" > "$tmp/p.ais" 2>/dev/null
        : > "$tmp/check"
        : > "$tmp/build"
        for _ in $(seq "$reps"); do
            measure "$aisc" check "$tmp/p.ais" >> "$tmp/check"
            measure "$aisc" build -O1 "$tmp/p.ais" -o "$tmp/p.apxmobj" >> "$tmp/build"
        done
        read -r ccpu cmem cexit < <(median "$tmp/check")
        read -r bcpu bmem bexit < <(median "$tmp/build")
        row=$(awk -v s="$shape" -v n="$ops" -v cc="$ccpu" -v cm="$cmem" -v ce="$cexit" \
            -v bc="$bcpu" -v bm="$bmem" -v be="$bexit" -v pc="$prev_cpu" -v pn="$prev_ops" 'BEGIN {
            cs = (ce == 0) ? sprintf("%.2f", cc) : sprintf("exit %d", ce)
            bs = (be == 0) ? sprintf("%.2f", bc) : sprintf("exit %d", be)
            cr = (cc > 0) ? sprintf("%.0fk", n / cc / 1000) : "–"
            br = (bc > 0) ? sprintf("%.0fk", n / bc / 1000) : "–"
            # Per doubling: the growth to the power 1 / log2(ops ratio).
            g = (pc != "" && pc > 0 && bc > 0) ? sprintf("%.2f× for %.1f× ops (%.2f× per 2×)", bc / pc, n / pn, exp(log(bc / pc) * log(2) / log(n / pn))) : "–"
            printf "| %s | %d | %s | %s | %.0f | %s | %s | %.0f | %s |", s, n, cs, cr, cm * 1024 / n, bs, br, bm * 1024 / n, g
        }')
        echo "$row"
        prev_cpu=$bcpu
        prev_ops=$ops
    done
done
