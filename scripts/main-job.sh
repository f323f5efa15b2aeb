#!/usr/bin/env bash
# The main job on a real dataset: build sluice, convert Fashion-MNIST (the
# Debian package dataset-fashion-mnist) into TFRecord shards of
# tf.train.Example, index, verify and summarize them, and measure the record
# formats on them.
#
# Then one feeder serves the shards to two trainer workers (two replicas
# each) on loopback: first consuming only, their traces checked for every
# element exactly once per epoch; then training an MLP and evaluating it on
# the test set (scripts/fmnist-train.sh: GPU replicas when the build has CUDA
# and a GPU is visible, else CPU replicas with the ring all-reduce across the
# workers; SLUICE_DEVICES=cpu|gpu chooses).
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

scripts/fmnist-train.sh --build build --data "$out" --devices "${SLUICE_DEVICES:-auto}"

echo "== record formats benchmark on this data"
build/tools/sluice-bench formats --repeat 3
