#!/usr/bin/env bash
# bubblewrap, the kernel sandbox restricted_shell steps run in (worker/sandbox):
# Debian's `bubblewrap` package. Skipped when `bwrap` is on PATH. Without it a
# worker refuses shell steps (sandbox_unavailable) unless a profile allows them bare.
# With the argument `optional` (mise run up), a machine where it cannot be installed
# gets a warning instead of an error: workers then refuse shell steps.
set -euo pipefail
if command -v bwrap > /dev/null; then
  exit 0
fi
if [ "$(id -u)" != 0 ] || ! command -v apt-get > /dev/null; then
  echo "setup-sandbox: no bwrap; install Debian's bubblewrap package (apt-get install bubblewrap)" >&2
  if [ "${1:-}" = "optional" ]; then
    echo "setup-sandbox: going on without it: shell steps will be refused (sandbox_unavailable)" >&2
    exit 0
  fi
  exit 1
fi
echo "setup-sandbox: installing Debian's bubblewrap package"
if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap > /dev/null 2>&1; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap > /dev/null
fi
command -v bwrap > /dev/null
