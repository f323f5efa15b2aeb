#!/usr/bin/env bash
# The main job on a real dataset: build sluice, convert Fashion-MNIST (the
# Debian package dataset-fashion-mnist) into TFRecord shards of
# tf.train.Example, index, verify and summarize them, and measure the record
# formats on them.
#
# Until the feeder and trainer land (issues #3 and #4) this is the whole job;
# it then becomes "one feeder + two trainers train an MLP on these shards".
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

echo "== record formats benchmark on this data"
build/tools/sluice-bench formats --repeat 3
