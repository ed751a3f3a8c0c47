#!/usr/bin/env bash
# Arize Phoenix (a trace backend that takes OTLP/HTTP at /v1/traces and
# reads spans back over its REST API), pinned, in its own virtual
# environment outside the repository. cli/tests/otlp_phoenix.rs starts it
# ($AIS_PHOENIX_PYTHON -m phoenix.server.main serve) on a free loopback port
# with a temporary working directory, and stops it.
set -euo pipefail

version="20.26.1"
venv="${AIS_PHOENIX_VENV:-$HOME/.cache/ais-test/phoenix-$version}"

if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c "import phoenix" 2>/dev/null; then
  echo "present: arize-phoenix $version in $venv"
else
  echo "installing arize-phoenix $version into $venv"
  python3 -m venv --clear "$venv"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "arize-phoenix==$version"
fi
echo "export AIS_PHOENIX_PYTHON=$venv/bin/python" >>"${AIS_TEST_ENV:-/dev/null}"
