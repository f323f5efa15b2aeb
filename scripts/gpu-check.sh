#!/usr/bin/env bash
# The trainer's GPU checks in one go, for a machine with a GPU (issue #4):
# build with CUDA into build-gpu-check/, run every gpu-labelled test
# (the cuda backend, staging, the CUDA models against the CPU model, and
# sluice-trainer on GPU replicas against CPU replicas), then print the
# figures: H2D rate against cudaMemcpyAsync's peak from pinned memory, the
# one-rank NCCL all-reduce latency, and the GPU-vs-CPU training agreement.
# Results (logs, figures) go under $OUT when it is set, else build-gpu-check/out.
# Meant to finish in well under 5 minutes on a 16-core H200 machine.
#
#   scripts/gpu-check.sh            exit 0: all passed; 1: a failure; 2: no CUDA build
set -uo pipefail
cd "$(dirname "$0")/.."
b=build-gpu-check
out=${OUT:-$b/out}
mkdir -p "$out"
export OUT="$out"
# NCCL says why it failed (a bare ncclInternalError otherwise); logging only
export NCCL_DEBUG="${NCCL_DEBUG:-WARN}"
t0=$(date +%s)
nvidia-smi -L 2>&1 | tee "$out/nvidia-smi.txt" || true
if ! cmake -S . -B "$b" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSLUICE_CUDA_ARCHS=90 >"$out/cmake.log" 2>&1; then
  tail -20 "$out/cmake.log"; exit 1
fi
if ! grep -q "CUDA .* and NCCL found" "$out/cmake.log"; then
  echo "gpu-check: CMake did not find CUDA and NCCL (see $out/cmake.log)"; exit 2
fi
if ! cmake --build "$b" -j"$(nproc)" >"$out/build.log" 2>&1; then
  grep -E "error|warning" "$out/build.log" | head -30; exit 1
fi
echo "== build: $(( $(date +%s) - t0 )) s"
status=0
(cd "$b" && ctest -L gpu --output-on-failure --timeout 240) 2>&1 | tee "$out/ctest-gpu.log"
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1
if grep -q "Skipped" "$out/ctest-gpu.log"; then
  echo "gpu-check: some gpu tests were skipped: no GPU visible?"; status=1
fi
echo "== figures"
# outside ctest, so bounded here: a hang must not eat the device time
timeout 90 "$b/tests/test_train_cuda" 2>&1 | tee "$out/test_train_cuda.log" | grep -E "^FIGURE|H2D|all-reduce" || status=1
[ -f "$out/gpu-train.json" ] && cat "$out/gpu-train.json"
echo "== trainer unit and integration tests on this machine (CPU paths)"
(cd "$b" && ctest -R "train" -L "unit|integration" --output-on-failure) >"$out/ctest-train.log" 2>&1 || status=1
tail -3 "$out/ctest-train.log"
echo "== gpu-check: $([ $status -eq 0 ] && echo PASSED || echo FAILED) in $(( $(date +%s) - t0 )) s; logs in $out"
exit $status
