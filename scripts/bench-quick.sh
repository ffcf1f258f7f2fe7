#!/usr/bin/env bash
# bench:quick: the benchmark harnesses once each, a few runs each, at the same
# time (they prove the harnesses run; their quick figures judge nothing and are not
# written anywhere). Each one's output is printed whole once all have ended; the exit
# status is the first failure's, if any.
set -uo pipefail
cd "$(dirname "$0")/.."
logs="$(mktemp -d)"
trap 'rm -rf "$logs"' EXIT
names=(hitl soak waiting cluster)
modules=(bench.hitl bench.hitl.soak bench.hitl.waiting bench.hitl.cluster)
pids=()
for i in "${!names[@]}"; do
  .venv/bin/python -m "${modules[$i]}" --quick > "$logs/${names[$i]}.log" 2>&1 &
  pids+=("$!")
done
status=0
for i in "${!names[@]}"; do
  if wait "${pids[$i]}"; then rc=0; else rc=$?; fi
  echo "===== python -m ${modules[$i]} --quick (exit $rc) ====="
  cat "$logs/${names[$i]}.log"
  if [ "$rc" -ne 0 ] && [ "$status" -eq 0 ]; then status=$rc; fi
done
exit "$status"
