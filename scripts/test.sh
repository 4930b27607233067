#!/usr/bin/env bash
# Sets everything up and runs every test (C++ and Python, registered with CTest).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bash "$root/scripts/setup.sh"
bash "$root/scripts/build.sh"
ctest --test-dir "${MCSERVE_BUILD_DIR:-$root/build}" -j "$(nproc)" --output-on-failure "$@"
