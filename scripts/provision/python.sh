#!/usr/bin/env bash
# One Python virtual environment, $AIS_PY_VENV (default target/py), with the
# pinned SDKs of python-requirements.txt. The tests run its python
# ($AIS_PY_VENV/bin/python); none of them installs anything.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here/../.."

venv="${AIS_PY_VENV:-$PWD/target/py}"
requirements="$here/python-requirements.txt"
stamp="$venv/.requirements"

if [ -x "$venv/bin/python" ] && cmp -s "$requirements" "$stamp"; then
  echo "present: $venv ($(grep -v '^#' "$requirements" | xargs))"
else
  echo "creating $venv"
  python3 -m venv --clear "$venv"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$requirements"
  cp "$requirements" "$stamp"
fi
echo "export AIS_PY_VENV=$venv" >>"${AIS_TEST_ENV:-/dev/null}"
