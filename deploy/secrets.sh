#!/usr/bin/env bash
# deploy/secrets/ for compose.yaml, once: the shim's certificate (shim.pem, shim.key) and
# a tokens file (tokens.json) with one identity, admin, whose token is printed here once.
#   deploy/secrets.sh [NAME]    NAME: the host name clients use (default localhost)
# A self-signed certificate, for a trial: clients pass --ca deploy/secrets/shim.pem. In
# production put your CA-issued certificate (then its chain) and key there instead.
# ENGINE (default podman) runs the image (IMAGE, default localhost/gatehouse:0.1.0) to
# write the tokens file and give the files to the image's user (uid 10001).
set -euo pipefail
ENGINE=${ENGINE:-podman}
IMAGE=${IMAGE:-localhost/gatehouse:0.1.0}
NAME=${1:-localhost}
dir="$(cd "$(dirname "$0")" && pwd)/secrets"
mkdir -p "$dir"
if [ ! -f "$dir/shim.pem" ]; then
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 365 \
    -subj "/CN=$NAME" -addext "subjectAltName=DNS:$NAME,DNS:localhost,IP:127.0.0.1" \
    -keyout "$dir/shim.key" -out "$dir/shim.pem" 2>/dev/null
  echo "made $dir/shim.pem and shim.key (self-signed for $NAME)"
fi
if [ ! -f "$dir/tokens.json" ]; then
  # shellcheck disable=SC2086  # ENGINE may carry options (podman --runtime runc …)
  $ENGINE run --rm --user 0 -v "$dir:/out" "$IMAGE" \
    tokens add admin --roles submitter,approver,operator --file /out/tokens.json
fi
# shellcheck disable=SC2086
$ENGINE run --rm --user 0 -v "$dir:/out" --entrypoint chown "$IMAGE" -R 10001:10001 /out
