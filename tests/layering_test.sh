#!/usr/bin/env bash
# Checks DESIGN.md §1/§5 layering: dependencies point server → engine → kernels; engine/ and tools/
# never touch raw tensor data (kernels/core/tensor_data.h) nor CUDA or gRPC headers.
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
fail=0
check() {  # check DESCRIPTION PATTERN DIR...
  local what=$1 pattern=$2; shift 2
  local hits
  hits=$(grep -rnE "$pattern" "$@" --include='*.h' --include='*.cc' --include='*.cu' 2>/dev/null)
  if [ -n "$hits" ]; then
    echo "FAIL: $what"; echo "$hits"; fail=1
  else
    echo "ok: $what"
  fi
}
check "engine/ and tools/ do not include kernels/core/tensor_data.h" '#include "kernels/core/tensor_data.h"' engine tools
check "engine/ includes no CUDA header" '#include [<"](cuda|cublas)' engine
check "engine/ includes no gRPC header" '#include [<"]grpc' engine
check "kernels/ includes nothing from engine/ or server/" '#include "(engine|server)/' kernels
[ "$fail" -eq 0 ] && echo "1 passed, 0 failed" || echo "0 passed, 1 failed"
exit $fail
