#!/usr/bin/env bash
# Sets everything up, builds mcserve-run and streams text from the bundled model.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bash "$root/scripts/setup.sh"
bash "$root/scripts/build.sh" mcserve-run
prompt=${1:-"The cat watched the gulls from the window."}
"${MCSERVE_BUILD_DIR:-$root/build}/tools/mcserve-run" --prompt "$prompt" --max_tokens 48 --seed 7
