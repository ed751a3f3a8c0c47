#!/usr/bin/env bash
# What compiling the bundled SQLite at -O1 (Cargo.toml,
# [profile.release.package.libsqlite3-sys]) costs at run time, and what it
# saves at build time (issue 33, docs/benchmarks.md "Build cost").
#
# Compiles libsqlite3-sys's sqlite3.c with the flags its build script uses at
# each LEVEL (default: O3 O2 O1), printing the CPU seconds of the compile,
# then runs bench/sqlite-opt.c against each build RUNS times (default 3).
#
# Usage: bench/sqlite-opt.sh [RUNS] [LEVEL...]      (needs gcc; ~5 minutes)
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-3}
shift || true
levels=("$@")
[ ${#levels[@]} -gt 0 ] || levels=(O3 O2 O1)
version=$(sed -n '/^name = "libsqlite3-sys"$/{n;s/version = "\(.*\)"/\1/p}' Cargo.lock)
src=$(ls -d "${CARGO_HOME:-$HOME/.cargo}"/registry/src/*/"libsqlite3-sys-$version"/sqlite3 | head -1)
[ -f "$src/sqlite3.c" ] || { echo "sqlite-opt: no sqlite3.c for libsqlite3-sys $version (run cargo fetch)" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# The defines of libsqlite3-sys's build script (bundled, Linux).
defs="-DSQLITE_CORE -DSQLITE_DEFAULT_FOREIGN_KEYS=1 -DSQLITE_ENABLE_API_ARMOR
 -DSQLITE_ENABLE_COLUMN_METADATA -DSQLITE_ENABLE_DBSTAT_VTAB -DSQLITE_ENABLE_FTS3
 -DSQLITE_ENABLE_FTS3_PARENTHESIS -DSQLITE_ENABLE_FTS5 -DSQLITE_ENABLE_JSON1
 -DSQLITE_ENABLE_LOAD_EXTENSION=1 -DSQLITE_ENABLE_MEMORY_MANAGEMENT -DSQLITE_ENABLE_RTREE
 -DSQLITE_ENABLE_STAT4 -DSQLITE_SOUNDEX -DSQLITE_THREADSAFE=1 -DSQLITE_USE_URI
 -DHAVE_USLEEP=1 -DHAVE_ISNAN -D_POSIX_THREAD_SAFE_FUNCTIONS -DHAVE_LOCALTIME_R"
for l in "${levels[@]}"; do
    # shellcheck disable=SC2086
    /usr/bin/time -f "compile -$l: %U user + %S sys CPU-s" \
        gcc -c -"$l" -ffunction-sections -fdata-sections -fPIC -m64 $defs \
        "$src/sqlite3.c" -o "$tmp/sqlite-$l.o"
    gcc -O2 -I"$src" bench/sqlite-opt.c "$tmp/sqlite-$l.o" -o "$tmp/bench-$l" -lpthread -lm -ldl
done
for _ in $(seq "$runs"); do
    for l in "${levels[@]}"; do
        echo "-$l: $("$tmp/bench-$l" 102400)"
    done
done
