#!/usr/bin/env bash
# Debian packages the tests need; installs only the missing ones.
#   postgresql   the private servers of the scale-out and store tests (testkit/src/pg.rs)
#   chromium     the headless browser test of `aisc report` (cli/tests/report.rs)
#   python3-venv the SDK virtual environment (python.sh) on Debian's python3
#   gcc libc6-dev  tree-sitter compiles the generated parser (cli/tests/editors.rs)
#   bubblewrap   the sandbox of the `bash` tool (vm/src/aam/shell.rs; vm/tests/aam_tools.rs)
#   nodejs npm   only when `node`/`npm` are absent (a machine may have them from elsewhere)
set -euo pipefail

wanted=(postgresql chromium python3-venv gcc libc6-dev bubblewrap)
command -v node >/dev/null || wanted+=(nodejs)
command -v npm >/dev/null || wanted+=(npm)

missing=()
for p in "${wanted[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if [ "${#missing[@]}" -eq 0 ]; then
  echo "all present: ${wanted[*]}"
  exit 0
fi

sudo=()
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "apt.sh: need root (or sudo) to install: ${missing[*]}" >&2; exit 1; }
  sudo=(sudo)
fi
echo "installing: ${missing[*]}"
"${sudo[@]}" apt-get update -qq
DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
