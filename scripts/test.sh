#!/usr/bin/env bash
# Install, then run the whole offline test suite (unit, contract, moto, handlers, end to end,
# benchmark smoke runs) and the template checks. Live-cluster tests are skipped.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
# aws-sam-cli pins its own boto3, so it lives in a virtualenv of its own
if [ ! -x .venv-sam/bin/sam ]; then
  python3 -m venv .venv-sam
  .venv-sam/bin/pip install --quiet --disable-pip-version-check aws-sam-cli
fi
export ERAGRAPH_SAM_CLI="$PWD/.venv-sam/bin/sam"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
python3 -m pytest -q -m "not live" "$@"
