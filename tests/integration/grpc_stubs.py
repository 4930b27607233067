"""Python stubs of mcserve.v1 generated with protoc and grpc_python_plugin into a directory, for the
gRPC integration tests (one recipe for all of them)."""
import os
import subprocess
import sys


def generate(out, proto_dir):
    """Generates mcserve/v1/generation.proto's stubs into `out`, puts it on sys.path, and returns
    (generation_pb2, generation_pb2_grpc)."""
    subprocess.run(["protoc", f"-I{proto_dir}", f"--python_out={out}", f"--grpc_out={out}",
                    "--plugin=protoc-gen-grpc=/usr/bin/grpc_python_plugin",
                    os.path.join(proto_dir, "mcserve", "v1", "generation.proto")], check=True)
    sys.path.insert(0, str(out))
    from mcserve.v1 import generation_pb2, generation_pb2_grpc
    return generation_pb2, generation_pb2_grpc
