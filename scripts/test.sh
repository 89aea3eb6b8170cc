#!/usr/bin/env bash
# Install, build the Lambda artefacts, then run the whole offline test suite (unit, contract,
# moto, handlers, end to end, benchmark smoke runs, the template checks and the size of the
# built packages). Live-cluster tests are skipped.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
# the environment install.sh made (and reuses): its python, pytest, eragraph and cfn-lint come first
export PATH="$PWD/${ERAGRAPH_VENV:-.venv}/bin:$PATH"
# sam build (needs a Python 3.12; installs aws-sam-cli into .venv-sam unless ERAGRAPH_SAM_CLI
# names one): tests/deployed measures .aws-sam/build, and must not skip for want of it
bash scripts/build_lambda.sh
# the policy scanner over template.yaml (tests/aws/test_template.py), in .venv-checkov
bash scripts/install_checkov.sh
export ERAGRAPH_SAM_CLI="${ERAGRAPH_SAM_CLI:-$PWD/.venv-sam/bin/sam}"
export ERAGRAPH_REQUIRE_BUILD=1
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
# per-test limits come from pyproject.toml (pytest-timeout); --durations shows where the time goes
python -m pytest -q -m "not live" --durations=25 "$@"
