#!/usr/bin/env bash
# Generates the Python gRPC stubs of proto/mcserve/v1/*.proto into OUTDIR (as OUTDIR/mcserve/v1/
# generation_pb2.py and generation_pb2_grpc.py) with protoc and grpc_python_plugin (Debian 12:
# protobuf-compiler, protobuf-compiler-grpc). Put OUTDIR and this package's directory on PYTHONPATH.
# Usage: generate_stubs.sh OUTDIR [PROTO_DIR]   (PROTO_DIR defaults to the repository's proto/)
set -euo pipefail

if [ $# -lt 1 ] || [ $# -gt 2 ]; then
  echo "usage: $0 OUTDIR [PROTO_DIR]" >&2
  exit 2
fi
out=$1
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
proto_dir=${2:-$here/../../proto}
plugin=${GRPC_PYTHON_PLUGIN:-$(command -v grpc_python_plugin || echo /usr/bin/grpc_python_plugin)}

[ -d "$proto_dir/mcserve/v1" ] || { echo "$0: no mcserve/v1 protos under $proto_dir" >&2; exit 1; }
[ -x "$plugin" ] || { echo "$0: grpc_python_plugin not found (apt install protobuf-compiler-grpc)" >&2; exit 1; }
command -v protoc >/dev/null || { echo "$0: protoc not found (apt install protobuf-compiler)" >&2; exit 1; }

mkdir -p "$out"
protoc -I"$proto_dir" --python_out="$out" --grpc_out="$out" --plugin=protoc-gen-grpc="$plugin" \
  "$proto_dir"/mcserve/v1/*.proto
