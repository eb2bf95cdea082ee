#!/usr/bin/env bash
# Runs `baton validate` for the zoo models and prints one Markdown table of the
# results (model x schedule x workers: predicted, measured, error), the table
# bench/RESULTS.md records.
#
#   bench/validation_table.sh [BATON] [OUT_DIR] [NPROC]
#
# BATON defaults to build/baton, OUT_DIR to out/validation, NPROC to 2. Each
# model runs pipedream, 1f1b and gpipe on stages 0-3,3-6 (the models have six
# layers) and dp on every rank, or the schedules BATON_SCHEDULES lists (a comma
# list, e.g. zb-h1,zb-h2) on the stages BATON_STAGES lists (default 0-3,3-6; the
# schedules that run chunks take them as chunks, e.g. 0-2,2-3,3-5,5-6 for two
# per rank); BATON_VALIDATE_ARGS adds flags to every validate (e.g.
# "--attempts 1"); a model's whole report is OUT_DIR/<model>/report.md.
set -euo pipefail

baton=${1:-build/baton}
out=${2:-out/validation}
nproc=${3:-2}
# model and microbatch size: layers of a few hundred microseconds to milliseconds.
models=("gpt-mini 16" "vgg-mini 32" "mlp 256")
schedules=${BATON_SCHEDULES:-pipedream,1f1b,gpipe,dp}
pattern=${schedules//,/|}
stages=${BATON_STAGES:-0-3,3-6}

echo "| model | schedule | stages | workers | microbatches | speed | run compute | attempts | steps | predicted | measured | median | range | error | within 10% |"
echo "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |"
for entry in "${models[@]}"; do
  read -r model size <<<"$entry"
  "$baton" validate --model "$model" --nproc "$nproc" --microbatch-size "$size" --stages "$stages" \
      --schedule "$schedules" --out "$out/$model" ${BATON_VALIDATE_ARGS:-} >/dev/null 2>"$out.$model.log" || true
  # The summary rows of the report, with the model in front.
  sed -n '/^## Summary/,/^## Link/p' "$out/$model/report.md" | grep -E "^\| ($pattern) " |
      sed "s/^| /| $model | /"
done
