#!/usr/bin/env bash
# Install Eragraph with its local (MiniLM, spaCy, FAISS), AWS, MCP, benchmark and test extras into an
# isolated virtual environment, .venv beside this script's project (ERAGRAPH_VENV moves it),
# created on the first run and reused after: never into the interpreter that happens to be first on
# PATH. The other scripts put .venv/bin first on PATH, so `eragraph` and `python` are the
# environment's own.
#
# torch first and pinned (torch==2.13.0), because an unpinned torch asked for by
# sentence-transformers would take whatever build the index offers. Which build that pin yields
# depends on the index: PyPI's Linux x86_64 wheel of torch 2.13.0 is the CUDA build (it pulls
# several GB of nvidia-* packages); set ERAGRAPH_TORCH_INDEX=https://download.pytorch.org/whl/cpu
# for the CPU-only build. Eragraph runs on the CPU either way.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${ERAGRAPH_VENV:-.venv}
python=${ERAGRAPH_PYTHON:-python3}
if [ ! -x "$venv/bin/python" ]; then
  echo "install.sh: creating the virtual environment $venv ($("$python" -V))" >&2
  "$python" -m venv "$venv"
else
  echo "install.sh: reusing the virtual environment $venv" >&2
fi
# --no-compile: pip would byte-compile all of the ~21,000 modules it installs (about 45 s of one
# core); Python compiles the few thousand that are imported, on first import, and keeps them
pip=("$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-compile)
if [ -n "${ERAGRAPH_TORCH_INDEX:-}" ]; then
  "${pip[@]}" --index-url "$ERAGRAPH_TORCH_INDEX" torch==2.13.0
else
  "${pip[@]}" torch==2.13.0
fi
"${pip[@]}" -e ".[local,aws,mcp,bench,dev]"
