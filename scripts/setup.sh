#!/usr/bin/env bash
# Create .venv with the machine's Python 3.11+ and install Gatehouse editable,
# with its dev tools. Re-runs are skipped unless pyproject.toml changed.
set -euo pipefail
cd "$(dirname "$0")/.."

python=${PYTHON:-python3}
if ! "$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
  echo "setup: Gatehouse needs Python 3.11 or newer; $("$python" --version) found" >&2
  exit 1
fi
stamp=.venv/.gatehouse-installed
want=$(sha256sum pyproject.toml | cut -d' ' -f1)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && [ -x .venv/bin/gatehouse ]; then
  exit 0
fi
echo "setup: installing Gatehouse into .venv (first run takes a minute)"
[ -x .venv/bin/python ] || "$python" -m venv --clear .venv
.venv/bin/python -m pip install --quiet --disable-pip-version-check --upgrade pip
.venv/bin/python -m pip install --quiet --disable-pip-version-check -e '.[dev]'
echo "$want" > "$stamp"
echo "setup: done"
