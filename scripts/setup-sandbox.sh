#!/usr/bin/env bash
# bubblewrap, the kernel sandbox restricted_shell steps run in (worker/sandbox):
# Debian's `bubblewrap` package. Skipped when `bwrap` is on PATH. Without it a
# worker refuses shell steps (sandbox_unavailable) unless a profile allows them bare.
# With the argument `optional` (mise run up), a machine where it cannot be installed
# gets a warning instead of an error: workers then refuse shell steps.
#
# With the argument `faketime` (the test tasks' setup:faketime), Debian's faketime
# package instead, for the tests only: the clock-jump tests step a worker's wall
# clock with libfaketime (tests/support/fakeclock.py); without it they are skipped.
# Installed when missing and apt-get is at hand; never an error.
set -euo pipefail

apt_install() {
  if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$1" > /dev/null 2>&1; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$1" > /dev/null
  fi
}

can_apt() {
  [ "$(id -u)" = 0 ] && command -v apt-get > /dev/null
}

if [ "${1:-}" = faketime ]; then
  if [ ! -e /usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1 ] && can_apt; then
    echo "setup-sandbox: installing Debian's faketime package (clock-jump tests)"
    apt_install faketime || echo "setup-sandbox: faketime not installed; clock-jump tests will skip" >&2
  fi
  exit 0
fi

if command -v bwrap > /dev/null; then
  exit 0
fi
if ! can_apt; then
  echo "setup-sandbox: no bwrap; install Debian's bubblewrap package (apt-get install bubblewrap)" >&2
  if [ "${1:-}" = "optional" ]; then
    echo "setup-sandbox: going on without it: shell steps will be refused (sandbox_unavailable)" >&2
    exit 0
  fi
  exit 1
fi
echo "setup-sandbox: installing Debian's bubblewrap package"
apt_install bubblewrap
command -v bwrap > /dev/null
