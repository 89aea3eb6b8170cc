#!/usr/bin/env bash
# Mutation testing of the modules a change touches (git diff against BASE, default main), each
# on its fast tests; fails when a touched module scores under 85 % killed. CPU-heavy: niced.
#   bash scripts/mutation.sh            # the targets the branch changed
#   bash scripts/mutation.sh --all      # every target (docs/testing/mutation.md)
#   bash scripts/mutation.sh domain-core services
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/${ERAGRAPH_VENV:-.venv}/bin:$PATH" HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
unset PYTHONPATH  # mutmut puts the mutated copy of the package first on the path
if [ "$#" -eq 0 ]; then set -- --changed main; fi
exec nice -n 15 python scripts/mutation.py "$@"
