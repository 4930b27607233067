#!/usr/bin/env bash
# Configures and builds mcserve into ${MCSERVE_BUILD_DIR:-build} (Release, Ninja).
# Extra arguments go to ninja (e.g. a target name).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${MCSERVE_BUILD_DIR:-$root/build}
jobs=${MCSERVE_JOBS:-$(nproc)}
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release ${MCSERVE_CMAKE_ARGS:-} >/dev/null
ninja -C "$build" -j "$jobs" "$@"
