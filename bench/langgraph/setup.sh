#!/usr/bin/env bash
# Makes bench/langgraph/.venv (git-ignored) with the pinned LangGraph stack
# used by the workload baselines. Idempotent: re-running only checks.
#
#   bash bench/langgraph/setup.sh            # python3 (3.11) on PATH
#   PYTHON=python3.11 bash bench/langgraph/setup.sh
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
py="${PYTHON:-python3}"
venv="$here/.venv"
if [ ! -x "$venv/bin/python" ]; then
  "$py" -m venv "$venv"
fi
pip=("$venv/bin/python" -m pip install --quiet --disable-pip-version-check)
"${pip[@]}" -r "$here/requirements.txt"
"${pip[@]}" --no-deps -r "$here/requirements-nodeps.txt"
"$venv/bin/python" - <<'PY'
import importlib.metadata as m
for p in ("langgraph", "langchain-openai"):
    print(f"{p}=={m.version(p)}")
PY
