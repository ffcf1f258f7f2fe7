#!/usr/bin/env bash
# bench:quick: the benchmark harnesses once each, a few runs each (they prove the
# harnesses run; their quick figures judge nothing and are not written anywhere). The
# side-by-side, soak and waiting harnesses run at the same time; the cluster harness
# (two shims and up to two workers of its own) after them, so the database's
# connections (max_connections, 100 by default) are not all taken at once. Each one's
# output is printed whole once it has ended; the exit status is the first failure's.
set -uo pipefail
cd "$(dirname "$0")/.."
logs="$(mktemp -d)"
trap 'rm -rf "$logs"' EXIT
names=(hitl soak waiting)
modules=(bench.hitl bench.hitl.soak bench.hitl.waiting)
pids=()
for i in "${!names[@]}"; do
  .venv/bin/python -m "${modules[$i]}" --quick > "$logs/${names[$i]}.log" 2>&1 &
  pids+=("$!")
done
status=0
report() {  # name module rc
  echo "===== python -m $2 --quick (exit $3) ====="
  cat "$logs/$1.log"
  if [ "$3" -ne 0 ] && [ "$status" -eq 0 ]; then status=$3; fi
}
for i in "${!names[@]}"; do
  if wait "${pids[$i]}"; then rc=0; else rc=$?; fi
  report "${names[$i]}" "${modules[$i]}" "$rc"
done
if .venv/bin/python -m bench.hitl.cluster --quick > "$logs/cluster.log" 2>&1; then rc=0; else rc=$?; fi
report cluster bench.hitl.cluster "$rc"
exit "$status"
