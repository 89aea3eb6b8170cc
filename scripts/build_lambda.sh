#!/usr/bin/env bash
# Build the Lambda artefacts (.aws-sam/build: the four functions and their layers) with
# `sam build`, without Docker: the layers' Makefiles pip-install manylinux wheels for CPython 3.12
# (see layers/README.md). Extra arguments go to `sam build`.
#
# Needs a Python 3.12 interpreter: SAM's python3.12 builder (the functions) insists on one, and
# the layers ship bytecode compiled by it. Looked up as `python3.12` on PATH if that runs, else
# the newest 3.12.* pyenv has installed ($(pyenv root)/versions/*/bin/python3.12; pyenv's shim
# only runs a version the current directory selects). aws-sam-cli: $ERAGRAPH_SAM_CLI, else
# .venv-sam/bin/sam, installed there if missing (it pins its own boto3: a virtualenv of its own).
set -euo pipefail
cd "$(dirname "$0")/.."

is_312() { "$1" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 12))' >/dev/null 2>&1; }

find_python312() {
  local candidate
  candidate=$(command -v python3.12 || true)
  if [ -n "$candidate" ] && is_312 "$candidate"; then
    # a pyenv shim on PATH resolves to a real interpreter only when it runs: ask it which
    "$candidate" -c 'import sys; print(sys.executable)'
    return
  fi
  if command -v pyenv >/dev/null 2>&1; then
    local root
    root=$(pyenv root)
    for candidate in $(printf '%s\n' "$root"/versions/3.12.*/bin/python3.12 | sort -r -V); do
      if is_312 "$candidate"; then
        echo "$candidate"
        return
      fi
    done
  fi
  return 1
}

if ! py312=$(find_python312); then
  echo "build_lambda.sh: no Python 3.12 interpreter found (neither a working python3.12 on PATH" >&2
  echo "nor a 3.12.* under \$(pyenv root)/versions). Install one, e.g. 'pyenv install 3.12'." >&2
  exit 1
fi

if [ -n "${ERAGRAPH_SAM_CLI:-}" ]; then
  sam=$ERAGRAPH_SAM_CLI
else
  if [ ! -x .venv-sam/bin/sam ]; then
    python3 -m venv .venv-sam
    .venv-sam/bin/pip install --quiet --disable-pip-version-check aws-sam-cli
  fi
  sam=$PWD/.venv-sam/bin/sam
fi
[ -x "$sam" ] || { echo "build_lambda.sh: $sam is not an executable aws-sam-cli" >&2; exit 1; }

export SAM_CLI_TELEMETRY=0
export ERAGRAPH_PY312=$py312
export PATH="$(dirname "$py312"):$PATH"
echo "build_lambda.sh: sam build with $("$py312" -V) ($py312)" >&2
start=$SECONDS
"$sam" build --template-file template.yaml "$@"
echo "build_lambda.sh: built .aws-sam/build in $((SECONDS - start)) s" >&2
