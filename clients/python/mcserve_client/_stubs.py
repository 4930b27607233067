"""The generated protobuf and gRPC modules (mcserve/v1/generation_pb2*.py), with a clear error if missing."""
from __future__ import annotations

try:
    from mcserve.v1 import generation_pb2 as pb
    from mcserve.v1 import generation_pb2_grpc as pb_grpc
except ImportError as error:  # pragma: no cover - depends on the installation
    raise ImportError(
        "mcserve_client needs the generated stubs mcserve/v1/generation_pb2.py and generation_pb2_grpc.py on "
        "sys.path: build the `mcserve_python_client` CMake target (they land in <build>/clients/python) or run "
        "clients/python/generate_stubs.sh OUTDIR and add OUTDIR to PYTHONPATH") from error

__all__ = ["pb", "pb_grpc"]
