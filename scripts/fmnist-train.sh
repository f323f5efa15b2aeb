#!/usr/bin/env bash
# The main job's training stage: one feeder serves the Fashion-MNIST
# training shards, a second one the test shards, and trainer workers train
# an MLP (784-256-128-10, 5 epochs) and evaluate it on the test set, which
# must reach 0.85 accuracy (from the predictions gathered in image order).
# Called by scripts/main-job.sh, and by scripts/gpu-check.sh on a GPU machine.
#
#   scripts/fmnist-train.sh [--build DIR] [--data DIR] [--devices auto|cpu|gpu]
#
#   --build DIR    sluice's build (default build)
#   --data DIR     the shards main-job.sh converted (default data/fmnist)
#   --devices      cpu: two workers of two CPU replicas each, gradients summed
#                  across them by the ring all-reduce;
#                  gpu: the GPUs split between two workers (NCCL across them),
#                  or one worker when there is one GPU: NCCL allows one rank
#                  per GPU, so two workers cannot share it;
#                  auto (default): gpu when sluice-trainer sees a GPU, else cpu
set -euo pipefail
cd "$(dirname "$0")/.."
build=build data=data/fmnist devices=auto
while [ $# -gt 0 ]; do
  case "$1" in
    --build) build=$2; shift 2 ;;
    --data) data=$2; shift 2 ;;
    --devices) devices=$2; shift 2 ;;
    -h|--help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "fmnist-train.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
trainer=$build/trainer/sluice-trainer
feeder=$build/feeder/sluice-feeder
# GPUs the trainer sees: --devices gpu:N parses only when GPU N exists (and
# only in a build with CUDA)
ngpu=0
while [ $ngpu -lt 16 ] && "$trainer" --devices gpu:$ngpu --help >/dev/null 2>&1; do ngpu=$((ngpu + 1)); done
case "$devices" in
  auto) [ $ngpu -gt 0 ] && devices=gpu || devices=cpu ;;
  cpu) ;;
  gpu) [ $ngpu -gt 0 ] || { echo "fmnist-train.sh: --devices gpu, but sluice-trainer sees no GPU" >&2; exit 1; } ;;
  *) echo "fmnist-train.sh: --devices auto, cpu or gpu, got '$devices'" >&2; exit 2 ;;
esac
specs=()
if [ "$devices" = cpu ]; then
  specs=(cpu:2 cpu:2)
  what="two workers x two CPU replicas, gradients summed across workers by the ring all-reduce"
elif [ $ngpu -eq 1 ]; then
  specs=(gpu:0)
  what="one worker on GPU 0 (two workers would need two GPUs: NCCL allows one rank per GPU)"
else
  half=$((ngpu / 2)) w0="" w1=""
  for ((i = 0; i < half; i++)); do w0+="${w0:+,}$i"; w1+="${w1:+,}$((half + i))"; done
  specs=("gpu:$w0" "gpu:$w1")
  what="two workers x $half GPUs ($w0 and $w1), NCCL across them"
fi
n=${#specs[@]}
echo "== train an MLP (784-256-128-10) for 5 epochs: one feeder, $what"
sock="ipc://$PWD/$data/feeder.sock"
esock="ipc://$PWD/$data/eval.sock"
"$feeder" --job examples/fmnist-train.json --files="$data/train-*.tfrecord" --listen "$sock" --threads 2 --quiet &
fpid=$!
"$feeder" --job examples/fmnist-test.json --files="$data/test-*.tfrecord.gz" --listen "$esock" --threads 1 --quiet &
epid=$!
trap 'kill $fpid $epid 2>/dev/null || true' EXIT
ring=()
[ $n -gt 1 ] && ring=(--ring "ipc://$PWD/$data/ring-0.sock,ipc://$PWD/$data/ring-1.sock")
pids=() outs=()
for ((w = 0; w < n; w++)); do
  "$trainer" --connect "$sock" --job fmnist-train --worker $w --workers $n \
    --devices "${specs[$w]}" --model mlp --hidden 256,128 --lr 0.05 --momentum 0.9 "${ring[@]}" \
    --eval-connect "$esock" --eval-job fmnist-test --predictions "$data/predictions.jsonl" >"$data/train-$w.json" &
  pids+=($!) outs+=("$data/train-$w.json")
done
for p in "${pids[@]}"; do wait "$p"; done
wait $fpid $epid
trap - EXIT
python3 - "$data/predictions.jsonl" "${outs[@]}" <<'PY'
import json, sys
s = [json.loads(open(p).read())["summary"] for p in sys.argv[2:]]
# the predictions, gathered from every worker by image id, in id order
pred = [json.loads(line) for line in open(sys.argv[1])]
assert [p["id"] for p in pred] == list(range(10000)), "predictions must cover ids 0..9999 in order"
acc = sum(p["prediction"] == p["label"] for p in pred) / len(pred)
assert abs(acc - s[0]["test_accuracy"]) < 1e-4, (acc, s[0]["test_accuracy"])
assert all(x["ok"] for x in s), s
assert len({x["weights_hash"] for x in s}) == 1, "workers' weights differ"
same = " on both workers" if len(s) == 2 else ""
print("last epoch: training loss %.4f, training accuracy %.4f; %.0f samples/s (global), input stall %.2f%%,"
      " H2D %.2f GB/s; weights identical%s (%s)" % (s[0]["loss"], s[0]["accuracy"],
      sum(x["stream_elements_per_s"] for x in s), max(x["input_stall_pct"] for x in s),
      min(x["h2d_gb_per_s"] for x in s), same, s[0]["weights_hash"]))
print("TEST ACCURACY %.4f on the %d images of the Fashion-MNIST test set (from the predictions gathered in id order: %s)" % (acc, len(pred), sys.argv[1]))
assert s[0]["test_rows"] == 10000, "the evaluation must see every test image once"
assert s[0]["test_accuracy"] >= 0.85, "test accuracy below 0.85"
PY
