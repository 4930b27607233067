"""What one decode step of our model reads and multiplies, from its safetensors header alone."""
import json
import os
import struct

DTYPE_BYTES = {"F32": 4, "BF16": 2, "F16": 2}
EMBEDDING_SUFFIX = "embeddings.weight"  # a gather: one row per token, not a matmul


def read_header(path):
    """Name -> (dtype, shape) of every tensor in a .safetensors file."""
    with open(path, "rb") as f:
        (length,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(length))
    return {k: (v["dtype"], tuple(v["shape"])) for k, v in header.items() if k != "__metadata__"}


def _numel(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def decode_weight_stats(model_dir):
    """bytes_per_token: weight bytes one batch-1 step reads (all but the embedding table);
    matmul_params: parameters in the 2-D projections (2 FLOPs each per token); matmul_shapes:
    (in, out) of each projection with how many times it occurs; params: all parameters."""
    header = read_header(os.path.join(model_dir, "model.safetensors"))
    stats = {"bytes_per_token": 0, "matmul_params": 0, "params": 0, "matmul_shapes": {}}
    for name, (dtype, shape) in header.items():
        stats["params"] += _numel(shape)
        if name.endswith(EMBEDDING_SUFFIX):
            continue
        stats["bytes_per_token"] += _numel(shape) * DTYPE_BYTES[dtype]
        if len(shape) == 2:
            stats["matmul_params"] += _numel(shape)
            key = (shape[1], shape[0])
            stats["matmul_shapes"][key] = stats["matmul_shapes"].get(key, 0) + 1
    return stats
