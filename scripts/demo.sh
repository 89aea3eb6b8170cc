#!/usr/bin/env bash
# Install, then ingest the bundled sample corpus into ./eragraph-store and answer a few questions.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
export PATH="$PWD/${ERAGRAPH_VENV:-.venv}/bin:$PATH"
eragraph demo --store "${ERAGRAPH_STORE:-eragraph-store}"
