#!/usr/bin/env bash
# Headless Chromium for the dashboard's browser test: Debian's `chromium` package
# (Playwright's Python package drives it; `playwright install` would download a
# browser, which this project never does). Skipped when /usr/bin/chromium is there.
set -euo pipefail
browser=${GATEHOUSE_CHROMIUM:-/usr/bin/chromium}
if [ -x "$browser" ]; then
  exit 0
fi
if [ "$(id -u)" != 0 ] || ! command -v apt-get > /dev/null; then
  echo "setup-browser: no $browser; install Debian's chromium package (apt-get install chromium)" \
    "or point GATEHOUSE_CHROMIUM at a Chromium; the browser test needs it" >&2
  exit 1
fi
echo "setup-browser: installing Debian's chromium package"
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium > /dev/null
test -x "$browser"
