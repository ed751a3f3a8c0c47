#!/usr/bin/env bash
# Builds the VS Code extension package, target/ais-VERSION.vsix, from
# editors/vscode with the npm registry only: the pinned packaging tool
# (@vscode/vsce) goes to target/vsce, the extension's runtime dependency
# (vscode-languageclient, pinned in its package.json) into a copy of the
# folder, so the source tree is left as it is.
#   scripts/build-vsix.sh && code --install-extension target/ais-*.vsix
set -euo pipefail
cd "$(dirname "$0")/.."

vsce_version=3.9.2
tools="$PWD/target/vsce"
if ! [ -x "$tools/node_modules/.bin/vsce" ] ||
  ! node -e 'process.exit(require(process.argv[1]).version === process.argv[2] ? 0 : 1)' \
    "$tools/node_modules/@vscode/vsce/package.json" "$vsce_version"; then
  npm install --no-audit --no-fund --save-exact --prefix "$tools" "@vscode/vsce@$vsce_version"
fi

work="$PWD/target/vsix-build"
rm -rf "$work"
mkdir -p "$work"
cp -R editors/vscode/. "$work/"
cp LICENSE "$work/LICENSE"
(cd "$work" && npm install --no-audit --no-fund --omit=dev)
version="$(node -p 'require(process.argv[1]).version' "$work/package.json")"
out="$PWD/target/ais-$version.vsix"
(cd "$work" && "$tools/node_modules/.bin/vsce" package --out "$out")
echo "built $out"
