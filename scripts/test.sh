#!/usr/bin/env bash
# Sets everything up and runs every test (C++ and Python, registered with CTest).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bash "$root/scripts/setup.sh"
bash "$root/scripts/build.sh"
ctest --test-dir "${MCSERVE_BUILD_DIR:-$root/build}" -j "$(nproc)" --output-on-failure -LE image "$@"

# The CUDA kernels on the emulator once more, under AddressSanitizer: an out-of-bounds access to
# emulated device memory fails the test, as compute-sanitizer's memcheck would on a GPU.
# MCSERVE_SKIP_ASAN=1 skips this part.
if [ -z "${MCSERVE_SKIP_ASAN:-}" ]; then
  asan=${MCSERVE_ASAN_BUILD_DIR:-$root/build-asan}
  cmake -S "$root" -B "$asan" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DMCSERVE_SANITIZE=ON -DMCSERVE_CUDA=OFF \
    -DMCSERVE_BUILD_BENCH=OFF >/dev/null
  ninja -C "$asan" -j "$(nproc)" emu_tests
  ctest --test-dir "$asan" -L emu -j "$(nproc)" --output-on-failure
fi

# The CPU image built and run (tests/image/): minutes of docker build, so after the rest and on its own.
# It reports a skip, with the reason, where no Docker engine can run. MCSERVE_SKIP_IMAGE=1 skips it.
# On a failure the test's own last lines are repeated at the very end, where a CI log's tail shows them.
if [ -z "${MCSERVE_SKIP_IMAGE:-}" ]; then
  build=${MCSERVE_BUILD_DIR:-$root/build}
  if ! ctest --test-dir "$build" -L image --output-on-failure; then
    echo "image test failed; the end of its output:"
    tail -n 40 "$build/Testing/Temporary/LastTest.log" 2>/dev/null || true
    exit 1
  fi
fi
