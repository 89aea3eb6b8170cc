#!/usr/bin/env bash
# Install Eragraph with its local (MiniLM, spaCy, FAISS), AWS, benchmark and test extras.
# torch first, pinned: the CPU build (an unpinned torch would pull several GB of CUDA).
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m pip install --quiet --disable-pip-version-check torch==2.13.0
python3 -m pip install --quiet --disable-pip-version-check -e ".[local,aws,bench,dev]"
