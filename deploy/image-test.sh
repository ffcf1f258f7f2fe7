#!/usr/bin/env bash
# The image's long check, by hand (root, Debian's podman and runc, PostgreSQL as the
# tests use it): make the Debian base if it is missing (deploy/base-image.sh), then
# build the image, start a shim and two workers from it against a fresh database and
# put a run through them
# (tests/e2e/test_image.py with IMAGE_TEST=1; the gate runs that file without it and
# skips the build, saying why). Measured on a 2-core machine: the base 96 s once, the
# build 80-98 s, then 22-34 s to all healthy and one run executed.
set -euo pipefail
cd "$(dirname "$0")/.."
bash deploy/base-image.sh
IMAGE_TEST=1 exec .venv/bin/pytest -q -p no:cacheprovider -p no:randomly tests/e2e/test_image.py "$@"
