#!/usr/bin/env bash
# Create .venv with the machine's Python 3.11+ and install Gatehouse editable: the
# product alone (what `demo` and `up` need); with the argument `dev`, its dev and
# test tools too (pytest, mypy, ruff, Schemathesis, Playwright...); with `opencode`,
# the dev tools and the pinned OpenCode (~350 MB: only recipes with opencode steps,
# and the tests of them, need it). Each part is skipped when up to date.
set -euo pipefail
cd "$(dirname "$0")/.."

python=${PYTHON:-python3}
if ! "$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
  echo "setup: Gatehouse needs Python 3.11 or newer; $("$python" --version) found" >&2
  exit 1
fi
case "${1:-}" in
  dev | opencode) mode=dev spec='.[dev]' ;;
  *) mode=product spec='.' ;;
esac
stamp=.venv/.gatehouse-installed
want=$(sha256sum pyproject.toml | cut -d' ' -f1)
have=$(cat "$stamp" 2> /dev/null || true)
# the dev install holds the product too: either stamp will do for the product alone
if [ ! -x .venv/bin/gatehouse ] || { [ "$have" != "$want dev" ] && { [ "$mode" = dev ] || [ "$have" != "$want product" ]; }; }; then
  echo "setup: installing Gatehouse into .venv ($mode; first run takes a minute)"
  [ -x .venv/bin/python ] || "$python" -m venv --clear .venv
  .venv/bin/python -m pip install --quiet --disable-pip-version-check --upgrade pip
  .venv/bin/python -m pip install --quiet --disable-pip-version-check -e "$spec"
  echo "$want $mode" > "$stamp"
  echo "setup: Python packages done"
fi

[ "${1:-}" = "opencode" ] || exit 0

# OpenCode, the executor engine, pinned in vendor/opencode (pin.json, package-lock.json).
# Not `npm ci`: npm drops other platforms' optional binaries from the lock and then
# refuses it. `npm install` with the lock present installs the locked tarballs and
# checks their integrity; the check below holds the result to pin.json as well.
oc=vendor/opencode
oc_stamp=$oc/node_modules/.gatehouse-installed
oc_want=$(cat $oc/package-lock.json $oc/pin.json | sha256sum | cut -d' ' -f1)
if [ ! -f "$oc_stamp" ] || [ "$(cat "$oc_stamp")" != "$oc_want" ] || [ ! -x $oc/node_modules/.bin/opencode ]; then
  echo "setup: installing the pinned OpenCode into $oc"
  npm install --prefix "$oc" --no-audit --no-fund --no-save --loglevel=error
  "$python" - "$oc" <<'PY'
import json, sys
from pathlib import Path
oc = Path(sys.argv[1])
pin = json.loads((oc / "pin.json").read_text())
got = json.loads((oc / "node_modules/.package-lock.json").read_text())["packages"]["node_modules/opencode-ai"]
if (got["version"], got["integrity"]) != (pin["version"], pin["integrity"]):
    sys.exit(f"setup: installed opencode-ai {got['version']} {got['integrity']} is not the pin {pin}")
PY
  echo "$oc_want" > "$oc_stamp"
fi
