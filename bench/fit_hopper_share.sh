#!/usr/bin/env bash
# The H100's tensor_share (sim/gpu_model.h: the share of its tensor-core peaks
# the GPU sustains in training, relative to the A100 on which the other
# constants were fitted), scanned against the two published H100 sources:
# Megatron-LM's bf16 weak-scaling table (bench/groundtruth_megatron_h100, 9
# rows) and NVIDIA's FP8 tables (bench/groundtruth_nemo_fp8, the 20 rows it
# counts). Prints each source's mean absolute percentage error at each share
# and their mean, the objective the shipped value minimizes (each source
# counted once, whatever its rows). Run from the repository root after building:
#   bench/fit_hopper_share.sh [BUILD_DIR] [FROM TO STEP]
set -euo pipefail
build=${1:-build}
from=${2:-0.66} to=${3:-0.92} step=${4:-0.01}
bf16="$build/bench/groundtruth_megatron_h100"
fp8="$build/bench/groundtruth_nemo_fp8"
for program in "$bf16" "$fp8"; do
  [[ -x "$program" ]] || { echo "fit_hopper_share.sh: $program is not built (cmake --build $build)" >&2; exit 2; }
done
# The last table row of each program: "| ... | MAPE% | worst% |".
mape() { "$@" 2>/dev/null | tail -n 1 | awk -F'|' '{ v = $(NF-2); gsub(/[ %]/, "", v); print v }'; }
echo "| tensor_share | bf16 (Megatron-LM, 9 rows) MAPE | FP8 (NeMo, 20 rows) MAPE | mean of the two |"
echo "|---|---|---|---|"
best="" best_mean=""
for share in $(LC_ALL=C seq "$from" "$step" "$to"); do
  a=$(mape "$bf16" --tensor-share "$share")
  b=$(mape "$fp8" --tensor-share "$share")
  mean=$(awk -v a="$a" -v b="$b" 'BEGIN { printf "%.2f", (a + b) / 2 }')
  echo "| $share | $a% | $b% | $mean% |"
  if [[ -z "$best_mean" ]] || awk -v m="$mean" -v b="$best_mean" 'BEGIN { exit !(m < b) }'; then
    best=$share best_mean=$mean
  fi
done
echo
echo "least mean: tensor_share $best ($best_mean%)"
