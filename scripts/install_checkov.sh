#!/usr/bin/env bash
# Install checkov (the policy scanner the template tests run over template.yaml) into its own
# virtual environment, .venv-checkov (it pins many packages of its own: never into .venv).
# Reused once installed; ERAGRAPH_CHECKOV names another checkov executable instead.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -n "${ERAGRAPH_CHECKOV:-}" ]; then
  exit 0
fi
if [ ! -x .venv-checkov/bin/checkov ]; then
  python3 -m venv .venv-checkov
  .venv-checkov/bin/pip install --quiet --disable-pip-version-check "checkov==3.3.30"
fi
echo "install_checkov.sh: $(.venv-checkov/bin/checkov --version)" >&2
