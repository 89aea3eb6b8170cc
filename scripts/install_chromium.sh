#!/usr/bin/env bash
# Install Debian's chromium package (the headless browser of the console's tests, tests/browser,
# driven by Playwright for Python: no browser is downloaded by Playwright). Does nothing when
# /usr/bin/chromium exists or ERAGRAPH_CHROMIUM names another browser. Needs root (CI runs as
# root); elsewhere it says what to run and exits 0, and the browser tests skip saying why
# (under ERAGRAPH_REQUIRE_BUILD=1 they fail instead).
set -euo pipefail
if [ -n "${ERAGRAPH_CHROMIUM:-}" ] || [ -x /usr/bin/chromium ]; then
  echo "install_chromium.sh: $("${ERAGRAPH_CHROMIUM:-/usr/bin/chromium}" --version 2>/dev/null || echo "${ERAGRAPH_CHROMIUM:-/usr/bin/chromium}")" >&2
  exit 0
fi
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
  echo "install_chromium.sh: no /usr/bin/chromium; install it with: sudo apt-get install -y chromium" >&2
  exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq chromium >/dev/null  # with its recommends (fonts), as tested
echo "install_chromium.sh: $(/usr/bin/chromium --version 2>/dev/null)" >&2
