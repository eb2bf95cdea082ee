#!/usr/bin/env bash
# Two hosts on one machine: the two ranks of a 2-stage mlp plan run as
# `baton run --backend gloo` in two network namespaces joined by a veth pair,
# started the way torchrun starts them (MASTER_ADDR, MASTER_PORT, RANK,
# WORLD_SIZE, LOCAL_RANK), with GLOO_SOCKET_IFNAME naming each side's veth.
# Rank 0's final weights must equal, byte for byte, those of the same run on
# the threads backend: both run the same Program with one intra-op thread per
# worker, the stages have no replicas (no all-reduce whose summation order
# could differ) and Gloo moves the raw bytes of each tensor, so every float
# operation happens in the same order on the same values.
#
#   netns_two_hosts.sh BATON SOURCE_DIR
#
# Exits 0 on success, 1 on a failure, 77 (ctest's skip) where namespaces
# cannot be made: not root, no `ip` or `timeout`, or the kernel refuses.
# The namespaces exist only in this process's run: every exit path deletes
# them (which deletes the veth pair inside them) and stops the ranks.
set -euo pipefail

baton=$1
source_dir=$2
# `timeout` of each of the three steps (profile, threads run, gloo ranks): together under
# ctest's 300 s, so that the EXIT trap always runs; the ranks' own --timeout is 30 s per wait.
readonly step_limit_s=90
readonly ns=(baton-$$-a baton-$$-b)
readonly veth=(bt$$a bt$$b)  # interface names: at most 15 characters
# The addresses live only inside this run's namespaces, so concurrent runs may share them.
readonly addr=(10.213.0.1 10.213.0.2)
scratch=$(mktemp -d "${TMPDIR:-/tmp}/baton-netns.XXXXXX")
made_ns=()
rank_pids=()

cleanup() {
  for pid in "${rank_pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${rank_pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  for name in "${made_ns[@]}"; do ip netns delete "$name" 2>/dev/null || true; done
  rm -rf "$scratch"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP

skip() {
  echo "SKIP: $*"
  exit 77
}

# Two namespaces, a veth pair between them, one address on each side.
make_hosts() {
  [[ $(id -u) -eq 0 ]] || skip "making network namespaces needs root"
  command -v ip >/dev/null || skip "no 'ip' command (Debian: iproute2)"
  command -v timeout >/dev/null || skip "no 'timeout' command (coreutils)"
  for name in "${ns[@]}"; do
    ip netns add "$name" 2>"$scratch/ip.err" || skip "ip netns add $name: $(cat "$scratch/ip.err")"
    made_ns+=("$name")
  done
  ip -n "${ns[0]}" link add "${veth[0]}" type veth peer name "${veth[1]}" netns "${ns[1]}" 2>"$scratch/ip.err" ||
    skip "ip link add type veth: $(cat "$scratch/ip.err")"
  for side in 0 1; do
    ip -n "${ns[side]}" address add "${addr[side]}/24" dev "${veth[side]}"
    ip -n "${ns[side]}" link set "${veth[side]}" up
    ip -n "${ns[side]}" link set lo up
  done
}

make_hosts
cd "$source_dir"
run_args=(--profile "$scratch/mlp.json" --topology topologies/cpu_2core.json --stages "0-3,3-6" --schedule 1f1b
          --model mlp --microbatches 4 --steps 2 --seed 7 --lr 0.1 --timeout 30)
timeout -k 5 "$step_limit_s" "$baton" profile measure --model mlp --microbatch-size 4 --warmup 1 --steps 2 \
  -o "$scratch/mlp.json" >/dev/null 2>"$scratch/profile.err" || { cat "$scratch/profile.err"; exit 1; }
timeout -k 5 "$step_limit_s" "$baton" run "${run_args[@]}" --backend threads \
  --save-weights "$scratch/threads.json" >/dev/null

for rank in 0 1; do
  ip netns exec "${ns[rank]}" env MASTER_ADDR="${addr[0]}" MASTER_PORT=29500 RANK=$rank WORLD_SIZE=2 \
    LOCAL_RANK=0 GLOO_SOCKET_IFNAME="${veth[rank]}" \
    timeout -k 5 "$step_limit_s" "$baton" run "${run_args[@]}" --backend gloo \
    --save-weights "$scratch/gloo.json" >"$scratch/rank$rank.out" 2>"$scratch/rank$rank.err" &
  rank_pids+=($!)
done
failed=0
for rank in 0 1; do
  status=0
  wait "${rank_pids[rank]}" || status=$?
  if [[ $status -ne 0 ]]; then
    echo "FAIL: rank $rank (in ${ns[rank]}, ${addr[rank]} on ${veth[rank]}) exited with $status:"
    cat "$scratch/rank$rank.err"
    failed=1
  fi
done
rank_pids=()
[[ $failed -eq 0 ]] || exit 1

grep -q "backend gloo" "$scratch/rank0.out" || { echo "FAIL: rank 0 printed no report"; exit 1; }
if ! cmp -s "$scratch/gloo.json" "$scratch/threads.json"; then
  echo "FAIL: the gloo ranks' final weights differ from the threads backend's"
  exit 1
fi
echo "PASS: two ranks in ${ns[*]} over ${veth[0]}-${veth[1]} reached the threads backend's weights exactly"
