#!/usr/bin/env bash
# What a GPU machine owes the project (docs/cuda.md, "On a GPU machine"), in one go:
#   1. the GPU kernel probe (bench/cuda_kernel_bench: each decode kernel's GB/s against a
#      device-to-device copy) and the decode benchmark on device cuda;
#   2. every CUDA parity test binary on device cuda (MCSERVE_TEST_DEVICE=cuda);
#   3. the same binaries under compute-sanitizer: memcheck, then racecheck and synccheck.
# Usage: scripts/gpu_check.sh BIN_DIR OUT_DIR [MODEL_DIR...]
#   BIN_DIR: a build directory (or any folder) holding the test binaries and the two benches;
#   OUT_DIR: gets summary.txt (one line per run) and logs/ (every run's output);
#   MODEL_DIR: models for decode_bench (default: models/kjv-gdn).
# Environment:
#   MCSERVE_GPU_CHECK_SHARDS (default 1): each binary runs as that many GoogleTest shards, separate
#     processes (the sanitizers slow the whole-model tests most);
#   MCSERVE_GPU_CHECK_JOBS (default 8): processes at once, each for at most
#     MCSERVE_GPU_CHECK_TIMEOUT_S (default 400) seconds;
#   MCSERVE_GPU_CHECK_BUDGET_S (default 480): seconds after which no further phase starts;
#   narrower runs: MCSERVE_GPU_CHECK_TESTS (binary names), MCSERVE_GPU_CHECK_MODES (of: plain
#     memcheck racecheck synccheck), MCSERVE_GPU_CHECK_BENCH=0 (no benches).
# A test binary whose tests all skip for want of a GPU counts as a failure here: the script exits 1
# unless every run passed and every phase started.
set -u
bin_dir=$1 out=$2
shift 2
repo=$(cd "$(dirname "$0")/.." && pwd)
models=("$@")
[ ${#models[@]} -eq 0 ] && models=("$repo/models/kjv-gdn")
jobs=${MCSERVE_GPU_CHECK_JOBS:-8}
budget=${MCSERVE_GPU_CHECK_BUDGET_S:-480}
per_binary=${MCSERVE_GPU_CHECK_TIMEOUT_S:-400}
shards=${MCSERVE_GPU_CHECK_SHARDS:-1}
start=$SECONDS
mkdir -p "$out/logs"
summary=$out/summary.txt
: > "$summary"
export MCSERVE_SOURCE_DIR=$repo MCSERVE_TEST_DATA_DIR=$repo/tests/data MCSERVE_TEST_DEVICE=cuda

find_bin() { find "$bin_dir" -type f -name "$1" -perm -u+x -print -quit; }
sanitizer=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null || true)
# The parity tests: the sources that include emu_test_util.h or emu_test_device.h (as tests/CMakeLists.txt).
mapfile -t tests < <(grep -lE '#include "(tests/unit/kernels/)?emu_test_(util|device)\.h"' \
  $(find "$repo/tests/unit" -name '*_test.cc') | xargs -n1 basename | sed 's/\.cc$//' | sort)
[ -n "${MCSERVE_GPU_CHECK_TESTS:-}" ] && read -r -a tests <<< "$MCSERVE_GPU_CHECK_TESTS"

nvidia-smi > "$out/logs/nvidia-smi.txt" 2>&1 || true

# run_one MODE NAME SHARD: runs shard SHARD of test binary NAME plainly or under compute-sanitizer's
# tool MODE; appends "MODE NAME[/SHARD] rc=.. passed=.. failed=.. skipped=.." to the summary.
run_one() {
  local mode=$1 name=$2 shard=$3 exe log
  exe=$(find_bin "$name")
  log=$out/logs/$name.$mode.$shard.log
  export GTEST_TOTAL_SHARDS=$shards GTEST_SHARD_INDEX=$shard
  [ "$shards" -gt 1 ] && name=$name/$shard
  if [ -z "$exe" ]; then echo "$mode $name missing" >> "$summary"; return; fi
  if [ "$mode" = plain ]; then
    timeout "$per_binary" "$exe" > "$log" 2>&1
  else
    timeout "$per_binary" "$sanitizer" --tool "$mode" --error-exitcode 1 "$exe" > "$log" 2>&1
  fi
  local rc=$?
  if grep -q "Running 0 tests" "$log"; then echo "$mode $name empty shard" >> "$summary"; return; fi
  local passed failed skipped
  passed=$(grep -oE '\[  PASSED  \] [0-9]+' "$log" | grep -oE '[0-9]+$' || echo 0)
  failed=$(grep -oE '\[  FAILED  \] [0-9]+ test' "$log" | grep -oE '[0-9]+' || echo 0)
  skipped=$(grep -oE '\[  SKIPPED \] [0-9]+ test' "$log" | grep -oE '[0-9]+' || echo 0)
  grep -q "no usable GPU" "$log" && rc="$rc(no GPU)"
  echo "$mode $name rc=$rc passed=${passed:-0} failed=$failed skipped=${skipped:-0}" >> "$summary"
}
export -f run_one find_bin
export out summary bin_dir sanitizer per_binary shards

# 1. The benches, alone on the GPU.
if [ "${MCSERVE_GPU_CHECK_BENCH:-1}" != 0 ]; then
  probe=$(find_bin cuda_kernel_bench)
  [ -n "$probe" ] && "$probe" --device cuda > "$out/kernel_bench.json" 2> "$out/logs/kernel_bench.log"
  echo "bench cuda_kernel_bench rc=$?" >> "$summary"
  decode=$(find_bin decode_bench)
  for model in "${models[@]}"; do
    for batch in 1 32 256; do
      [ -n "$decode" ] && "$decode" --model "$model" --device cuda --batch $batch --steps 256 \
        >> "$out/decode_bench.jsonl" 2>> "$out/logs/decode_bench.log"
      rc=$?
      echo "bench decode_bench ${model##*/} b$batch rc=$rc" >> "$summary"
    done
  done
fi

# 2-3. The parity tests: plainly, then under each sanitizer tool while the budget lasts.
modes=(plain)
[ -n "$sanitizer" ] && modes+=(memcheck racecheck synccheck)
[ -n "${MCSERVE_GPU_CHECK_MODES:-}" ] && read -r -a modes <<< "$MCSERVE_GPU_CHECK_MODES"
for mode in "${modes[@]}"; do
  if (( SECONDS - start > budget )); then echo "$mode not started: budget spent" >> "$summary"; continue; fi
  for name in "${tests[@]}"; do
    for ((shard = 0; shard < shards; ++shard)); do echo "$name $shard"; done
  done | xargs -P "$jobs" -L1 bash -c "run_one $mode \$0 \$1"
done
echo "total ${SECONDS}s" >> "$summary"
cat "$summary"
# Exit status: 0 only when every run passed (or was an empty shard) and every phase started.
! grep -vE 'rc=0 passed|empty shard|^total ' "$summary" | grep -q .
