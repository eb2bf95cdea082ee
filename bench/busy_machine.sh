#!/usr/bin/env bash
# Calibrates the link between two Gloo ranks with 0, 1 and 2 busy loops (sh
# spinning) beside them and prints one Markdown table: the fastest one-way
# time of 4 B and 4 MiB messages, the median 4 B all-reduce, the calibration's
# wall time, or its error. bench/RESULTS.md, "Gloo ranks on a busy machine".
#
#   bench/busy_machine.sh [BATON] [OUT_DIR] [LOOPS...]
#
# BATON defaults to build/baton, OUT_DIR to out/busy-machine, LOOPS to 0 1 2.
# The busy loops are this script's children and end with each calibration.
set -euo pipefail

baton=${1:-build/baton}
out=${2:-out/busy-machine}
shift $(($# < 2 ? $# : 2))
loops=("$@")
[ ${#loops[@]} -gt 0 ] || loops=(0 1 2)
mkdir -p "$out"

echo "| busy loops | one-way 4 B | one-way 4 MiB | all-reduce 4 B | wall | calibrate says |"
echo "| ---: | ---: | ---: | ---: | ---: | --- |"
for n in "${loops[@]}"; do
  pids=()
  for ((i = 0; i < n; ++i)); do
    sh -c 'while :; do :; done' &
    pids+=($!)
  done
  start=$(date +%s%N)
  status=0
  timeout 600 "$baton" calibrate --nproc 2 --repeats 15 --loaded-rounds 0 -o "$out/link-$n.json" \
    >"$out/calibrate-$n.log" 2>&1 || status=$?
  wall=$(awk -v a="$start" -v b="$(date +%s%N)" 'BEGIN { print (b - a) / 1e9 }')
  [ ${#pids[@]} -eq 0 ] || kill "${pids[@]}"
  wait 2>/dev/null || true
  if [ "$status" -eq 0 ]; then
    small=$(grep -E '^4 B ' "$out/calibrate-$n.log" | awk '{print $3" "$4}')
    large=$(grep -E '^4.0 MiB ' "$out/calibrate-$n.log" | awk '{print $3" "$4}')
    reduce=$(grep -E '^4 B ' "$out/calibrate-$n.log" | awk '{print $7" "$8}')
    said="fit written"
    grep -q "warning: this machine is busy" "$out/calibrate-$n.log" && said="$said; warned of the load"
  else
    small="-" large="-" reduce="-"
    said=$(grep "^baton: calibrate:" "$out/calibrate-$n.log" | grep -v "warning:" | head -1 |
      sed 's/^baton: calibrate: //' | cut -c1-120)
  fi
  printf "| %d | %s | %s | %s | %.1f s | %s |\n" "$n" "$small" "$large" "$reduce" "$wall" "$said"
done
