#!/usr/bin/env bash
# How far apart `baton profile measure --device cuda` lands when taken again and
# again, back to back, on one machine: the spread behind validate's errors at
# micro-batch 64, where each pass is as fast as the host core that issues it
# (bench/RESULTS.md, "The executor on an H200").
#
# Usage: bench/gpu_profile_spread.sh BATON OUTDIR [ROUNDS] [CPUS]
#   BATON   the baton binary (built with the GPU executor)
#   OUTDIR  where the profiles and their logs go
#   ROUNDS  measurements per model (default 5)
#   CPUS    run every measurement on these cores only (taskset -c, e.g. the
#           GPU's NUMA-local ones from `nvidia-smi topo -m`), to tell a
#           process's placement from other causes of the spread
# Prints one Markdown row per measurement: model, round, the sum of a
# microbatch's forwards and backwards, the host's share of it, and the mean
# clock of the CPU's cores (/proc/cpuinfo) just before.
set -euo pipefail
[[ $# -ge 2 ]] || { sed -n '2,/^set -euo/p' "$0" | sed '$d'; exit 2; }
baton=$1 out=$2 rounds=${3:-5} cpus=${4:-}
pin=()
[[ -n "$cpus" ]] && pin=(taskset -c "$cpus")
mkdir -p "$out"
echo "| model | round | F + B per microbatch | host share | CPU MHz before |"
echo "|---|---|---|---|---|"
for model in mlp gpt-mini; do
  for round in $(seq "$rounds"); do
    mhz=$(awk '/^cpu MHz/ {s += $4; n++} END {if (n) printf "%.0f", s / n; else print "-"}' /proc/cpuinfo)
    "${pin[@]}" "$baton" profile measure --model "$model" --device cuda --microbatch-size 64 --steps 50 \
      -o "$out/$model-$round.json" 2>"$out/$model-$round.log"
    python3 - "$out/$model-$round.json" "$model" "$round" "$mhz" <<'PY'
import json, sys
layers = json.load(open(sys.argv[1]))["layers"]
device = sum(l["forward_ms"] + l["backward_ms"] for l in layers)
host = sum(l.get("host_forward_ms", 0) + l.get("host_backward_ms", 0) for l in layers)
print(f"| {sys.argv[2]} | {sys.argv[3]} | {device:.3f} ms | {host / device:.2f} | {sys.argv[4]} |")
PY
  done
done
