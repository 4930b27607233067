#!/usr/bin/env bash
# Checks the layering (docs/architecture.md): dependencies point one way, server → engine → kernels,
# with base/ below all of them and cli/ beside the server for the binaries' flags. Five rules, plus
# that engine/ and tools/ never touch raw tensor data (kernels/core/tensor_data.h).
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
fail=0
passed=0
check() {  # check DESCRIPTION PATTERN DIR...
  local what=$1 pattern=$2; shift 2
  local hits
  hits=$(grep -rnE "$pattern" "$@" --include='*.h' --include='*.cc' --include='*.cu' --include='*.cuh' \
    --include='CMakeLists.txt' 2>/dev/null)
  if [ -n "$hits" ]; then
    echo "FAIL: $what"; echo "$hits"; fail=$((fail + 1))
  else
    echo "ok: $what"; passed=$((passed + 1))
  fi
}
inc='#include [<"]'
# 1. server → engine → kernels, one way: the server reaches kernels only through the engine, and
#    nothing below the server includes it (nor the flags in cli/ or the tools).
check "1. server/ includes nothing of kernels/" "${inc}kernels/" server
check "1. engine/ includes nothing of server/, cli/, tools/ or clients/" "${inc}(server|cli|tools|clients)/" engine
check "1. base/ includes nothing of mcserve" "${inc}(kernels|engine|server|cli|tools|clients)/" base
# 2. The engine speaks no wire protocol and no device API: no gRPC, protobuf, mcserve/v1 or CUDA header.
check "2. engine/ includes no gRPC, protobuf or mcserve/v1 header" \
  "${inc}(grpc|grpcpp|google/protobuf|mcserve/v1|proto/)" engine
check "2. engine/ includes no CUDA header" "${inc}(cuda|cublas)" engine
# 3. Kernels are the bottom layer.
check "3. kernels/ includes nothing of engine/, server/, cli/ or tools/" "${inc}(engine|server|cli|tools)/" kernels
# 4. Clients speak only the wire protocol.
check "4. clients/ include nothing of engine/, kernels/ or server/" "${inc}(engine|kernels|server)/" clients
# 5. The tools are not compiled into the server: no tools/ header or source in server/.
check "5. server/ includes and compiles nothing of tools/" "(${inc}tools/|/tools/)" server
check "engine/ and tools/ do not include kernels/core/tensor_data.h" '#include "kernels/core/tensor_data.h"' engine tools
echo "$passed passed, $fail failed"
[ "$fail" -eq 0 ]
