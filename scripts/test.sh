#!/usr/bin/env bash
# Install, build the Lambda artefacts, then run the whole offline test suite (unit, contract,
# moto, handlers, end to end, the console in headless Chromium, benchmark smoke runs, the
# template checks and the size of the built packages). Live-cluster tests are skipped.
#
# The suite runs on pytest-xdist workers: ERAGRAPH_TEST_WORKERS of them (default: one per CPU,
# `-n auto`; 0 runs it in this process). Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
logs=$(mktemp -d)
pids=()
stop() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  rm -rf "$logs"
}
trap stop EXIT
# sam build (needs a Python 3.12; installs aws-sam-cli into .venv-sam unless ERAGRAPH_SAM_CLI
# names one): tests/deployed measures .aws-sam/build, and must not skip for want of it. It and
# the policy scanner (tests/aws/test_template.py, in .venv-checkov) use environments of their
# own, not .venv: both run while install.sh installs, and their output follows when they end.
bash scripts/build_lambda.sh >"$logs/build_lambda" 2>&1 &
pids+=($!)
bash scripts/install_checkov.sh >"$logs/install_checkov" 2>&1 &
pids+=($!)
# Debian's chromium for the console's browser tests (tests/browser; root only, when missing)
bash scripts/install_chromium.sh >"$logs/install_chromium" 2>&1 &
pids+=($!)
names=(build_lambda install_checkov install_chromium)
bash scripts/install.sh
for i in "${!pids[@]}"; do
  name=${names[$i]}
  status=0
  wait "${pids[$i]}" || status=$?
  cat "$logs/$name" >&2
  if [ "$status" != 0 ]; then
    echo "test.sh: scripts/$name.sh failed ($status)" >&2
    exit "$status"
  fi
done
pids=()
# the environment install.sh made (and reuses): its python, pytest, eragraph and cfn-lint come first
export PATH="$PWD/${ERAGRAPH_VENV:-.venv}/bin:$PATH"
export ERAGRAPH_SAM_CLI="${ERAGRAPH_SAM_CLI:-$PWD/.venv-sam/bin/sam}"
export ERAGRAPH_REQUIRE_BUILD=1
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
# per-test limits come from pyproject.toml (pytest-timeout); --durations shows where the time goes.
# First, by themselves, the tests marked `alone`: they rewrite what the others run in (rerunning
# install.sh reinstalls the package into .venv under any test starting `eragraph` meanwhile).
# Then the rest on the workers; --dist loadgroup: the tests of a file that share a module-scoped
# fixture (a served store, a started Lambda function, a loopback cloud) run on one worker
# (tests/conftest.py groups them). Both always run; the first failure's status is the result.
workers=${ERAGRAPH_TEST_WORKERS:-auto}
status=0
python -m pytest -q -m "alone and not live" "$@" || status=$?
[ "$status" = 5 ] && status=0  # 5: no test selected (arguments that name none of them)
rest=0
python -m pytest -q -m "not alone and not live" -n "$workers" --dist loadgroup --durations=25 "$@" || rest=$?
[ "$status" != 0 ] || status=$rest
exit "$status"
