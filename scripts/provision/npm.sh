#!/usr/bin/env bash
# Pinned npm packages in $AIS_NPM_DIR (default target/npm):
#   @modelcontextprotocol/server-filesystem  the real MCP server (vm/tests/aam_mcp.rs)
#   ws                                       the DevTools client of cli/tests/report/browser.js
#   vscode-textmate, vscode-oniguruma        VS Code's TextMate engine (cli/tests/editors.rs)
set -euo pipefail
cd "$(dirname "$0")/../.."

dir="${AIS_NPM_DIR:-$PWD/target/npm}"
pins=(
  @modelcontextprotocol/server-filesystem@2026.8.31
  ws@8.23.0
  vscode-textmate@9.3.2
  vscode-oniguruma@2.0.1
)

installed() { # name@version -> is that version in node_modules?
  local name="${1%@*}" version="${1##*@}" manifest
  manifest="$dir/node_modules/$name/package.json"
  [ -f "$manifest" ] && node -e 'process.exit(require(process.argv[1]).version === process.argv[2] ? 0 : 1)' "$manifest" "$version"
}

missing=()
for p in "${pins[@]}"; do installed "$p" || missing+=("$p"); done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "installing into $dir: ${missing[*]}"
  mkdir -p "$dir"
  npm install --no-audit --no-fund --save-exact --prefix "$dir" "${pins[@]}"
else
  echo "all present in $dir: ${pins[*]}"
fi
echo "export AIS_NPM_DIR=$dir" >>"${AIS_TEST_ENV:-/dev/null}"
