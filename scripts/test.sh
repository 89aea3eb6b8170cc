#!/usr/bin/env bash
# Install, build the Lambda artefacts, then run the whole offline test suite (unit, contract,
# moto, handlers, end to end, the console in headless Chromium, benchmark smoke runs, the
# template checks and the size of the built packages). Live-cluster tests are skipped.
#
# The suite runs on pytest-xdist workers: ERAGRAPH_TEST_WORKERS of them (default: one per CPU,
# `-n auto`; 0 runs it in this process). Extra arguments go to pytest.
#
# At the end (pass or fail) it prints how long each phase took, wall-clock seconds: the install,
# the three jobs beside it (sam build, the policy scanner, chromium), and each pytest phase.
set -euo pipefail
cd "$(dirname "$0")/.."
logs=$(mktemp -d)
pids=()
started=$(date +%s)
times=()
timed() {  # timed NAME SECONDS: one phase's time, for the summary
  times+=("$1 $2 s")
}
summary() {
  local name
  for name in build_lambda install_checkov install_chromium; do
    [ -f "$logs/$name.s" ] && timed "scripts/$name.sh$([ $name = build_lambda ] && echo ' (sam build)'), beside install" "$(cat "$logs/$name.s")"
  done
  timed total $(($(date +%s) - started))
  echo "test.sh: phase times (wall clock):" >&2
  printf '  %s\n' "${times[@]}" >&2
}
stop() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  summary
  rm -rf "$logs"
}
trap stop EXIT
background() {  # background NAME: scripts/NAME.sh, its output and its time in $logs
  local name=$1
  (
    t=$(date +%s)
    status=0
    bash "scripts/$name.sh" >"$logs/$name" 2>&1 || status=$?
    echo $(($(date +%s) - t)) >"$logs/$name.s"
    exit "$status"
  ) &
  pids+=($!)
}
# sam build (needs a Python 3.12; installs aws-sam-cli into .venv-sam unless ERAGRAPH_SAM_CLI
# names one): tests/deployed measures .aws-sam/build, and must not skip for want of it. It and
# the policy scanner (tests/aws/test_template.py, in .venv-checkov) use environments of their
# own, not .venv: both run while install.sh installs, and their output follows when they end.
background build_lambda
background install_checkov
# Debian's chromium for the console's browser tests (tests/browser; root only, when missing)
background install_chromium
names=(build_lambda install_checkov install_chromium)
t=$(date +%s)
bash scripts/install.sh
timed install $(($(date +%s) - t))
t=$(date +%s)
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
timed "waiting for the jobs beside install" $(($(date +%s) - t))
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
t=$(date +%s)
python -m pytest -q -m "alone and not live" "$@" || status=$?
timed "pytest, the tests marked alone" $(($(date +%s) - t))
[ "$status" = 5 ] && status=0  # 5: no test selected (arguments that name none of them)
rest=0
t=$(date +%s)
python -m pytest -q -m "not alone and not live" -n "$workers" --dist loadgroup --durations=25 "$@" || rest=$?
timed "pytest, the rest on $workers workers" $(($(date +%s) - t))
[ "$status" != 0 ] || status=$rest
exit "$status"
