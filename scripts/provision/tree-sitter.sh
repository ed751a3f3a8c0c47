#!/usr/bin/env bash
# The tree-sitter CLI (cli/tests/editors.rs), from crates.io into
# $AIS_NPM_DIR/bin: the npm package of the same CLI downloads its binary from
# outside the registry at install time.
set -euo pipefail
cd "$(dirname "$0")/../.."

version=0.27.1
dir="${AIS_NPM_DIR:-$PWD/target/npm}"
if "$dir/bin/tree-sitter" --version 2>/dev/null | grep -q "tree-sitter $version"; then
  echo "present: $("$dir/bin/tree-sitter" --version)"
else
  echo "installing tree-sitter-cli $version into $dir/bin"
  # From a scratch folder with its own target dir, and with standard input
  # closed: run from the repository, cargo wrote a failed rustc probe into
  # its target/.rustc_info.json, and every later cargo command then failed
  # with "failed to run rustc to learn about target-specific information".
  scratch="$(mktemp -d)"
  (cd "$scratch" && cargo install --quiet --locked --no-default-features \
    --target-dir "$scratch/target" --root "$dir" "tree-sitter-cli@$version" </dev/null)
  rm -rf "$scratch"
fi
