#!/usr/bin/env bash
# The main job on a real dataset: build sluice, convert Fashion-MNIST (the
# Debian package dataset-fashion-mnist) into TFRecord shards of
# tf.train.Example, index, verify and summarize them, and measure the record
# formats on them.
#
# Then one feeder serves the shards to two trainer workers (two replicas
# each) on loopback: first consuming only, their traces checked for every
# element exactly once per epoch; then training an MLP (CPU replicas, ring
# all-reduce across the workers) and evaluating it on the test set.
#
#   scripts/main-job.sh [OUTPUT_DIR]       (default data/fmnist)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$(nproc)"

src=/usr/share/datasets/fashion-mnist
out=${1:-data/fmnist}
rec=build/tools/sluice-record
mkdir -p "$out"

echo "== convert Fashion-MNIST to TFRecord shards in $out"
$rec convert idx --images "$src/train-images-idx3-ubyte.gz" --labels "$src/train-labels-idx1-ubyte.gz" \
  --output-dir "$out" --prefix train --shards 8 --index
$rec convert idx --images "$src/t10k-images-idx3-ubyte.gz" --labels "$src/t10k-labels-idx1-ubyte.gz" \
  --output-dir "$out" --prefix test --shards 2 --compression gzip

echo "== verify every record of every shard"
$rec verify "$out"/train-*.tfrecord "$out"/test-*.tfrecord.gz

echo "== counts"
$rec count "$out"/train-*.tfrecord "$out"/test-*.tfrecord.gz

echo "== summary of the training shards"
$rec stats "$out"/train-*.tfrecord

echo "== the test shard as JSON lines ($out/test-00000.jsonl), first record:"
$rec cat --decode example "$out"/test-00000-of-00002.tfrecord.gz >"$out/test-00000.jsonl"
head -n 1 "$out/test-00000.jsonl" | cut -c 1-240
echo "..."

echo "== serve the training shards: one feeder, two trainer workers of two replicas each (input check)"
sock="ipc://$PWD/$out/feeder.sock"
build/feeder/sluice-feeder --job examples/fmnist-train.json --files="$out/train-*.tfrecord" \
  --listen "$sock" --threads 2 --quiet &
feeder=$!
trap 'kill $feeder 2>/dev/null || true' EXIT
pids=()
for w in 0 1; do
  build/trainer/sluice-trainer --connect "$sock" --job fmnist-train --worker $w --workers 2 \
    --devices cpu:2 --model none --trace "$out/trace-$w.jsonl" --quiet >/dev/null &
  pids+=($!)
done
for p in "${pids[@]}"; do wait "$p"; done
wait $feeder
trap - EXIT
python3 tools/check_traces.py --expect 60000 "$out"/trace-0.jsonl "$out"/trace-1.jsonl

echo "== train an MLP (784-256-128-10) for 5 epochs: one feeder, two workers x two CPU replicas,"
echo "   gradients summed across workers by the ring all-reduce"
build/feeder/sluice-feeder --job examples/fmnist-train.json --files="$out/train-*.tfrecord" \
  --listen "$sock" --threads 2 --quiet &
feeder=$!
esock="ipc://$PWD/$out/eval.sock"
build/feeder/sluice-feeder --job examples/fmnist-test.json --files="$out/test-*.tfrecord.gz" \
  --listen "$esock" --threads 1 --quiet &
efeeder=$!
trap 'kill $feeder $efeeder 2>/dev/null || true' EXIT
ring="ipc://$PWD/$out/ring-0.sock,ipc://$PWD/$out/ring-1.sock"
pids=()
for w in 0 1; do
  build/trainer/sluice-trainer --connect "$sock" --job fmnist-train --worker $w --workers 2 \
    --devices cpu:2 --model mlp --hidden 256,128 --lr 0.05 --momentum 0.9 --ring "$ring" \
    --eval-connect "$esock" --eval-job fmnist-test --predictions "$out/predictions.jsonl" >"$out/train-$w.json" &
  pids+=($!)
done
for p in "${pids[@]}"; do wait "$p"; done
wait $feeder $efeeder
trap - EXIT
python3 - "$out"/train-0.json "$out"/train-1.json "$out"/predictions.jsonl <<'PY'
import json, sys
s = [json.loads(open(p).read())["summary"] for p in sys.argv[1:3]]
# the predictions, gathered from both workers by image id, in id order
pred = [json.loads(line) for line in open(sys.argv[3])]
assert [p["id"] for p in pred] == list(range(10000)), "predictions must cover ids 0..9999 in order"
acc = sum(p["prediction"] == p["label"] for p in pred) / len(pred)
assert abs(acc - s[0]["test_accuracy"]) < 1e-4, (acc, s[0]["test_accuracy"])
assert all(x["ok"] for x in s), s
assert s[0]["weights_hash"] == s[1]["weights_hash"], "workers' weights differ"
print("last epoch: training loss %.4f, training accuracy %.4f; %.0f samples/s (global), input stall %.2f%%;"
      " weights identical on both workers (%s)" % (s[0]["loss"], s[0]["accuracy"],
      sum(x["stream_elements_per_s"] for x in s), max(x["input_stall_pct"] for x in s), s[0]["weights_hash"]))
print("TEST ACCURACY %.4f on the %d images of the Fashion-MNIST test set (from the predictions gathered in id order: %s)" % (acc, len(pred), sys.argv[3]))
assert s[0]["test_rows"] == 10000, "the evaluation must see every test image once"
assert s[0]["test_accuracy"] >= 0.85, "test accuracy below 0.85"

PY

echo "== record formats benchmark on this data"
build/tools/sluice-bench formats --repeat 3
