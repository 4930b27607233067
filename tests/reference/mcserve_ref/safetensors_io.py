"""Tiny pure-Python safetensors reader/writer (numpy only; no `safetensors` package).

Format: u64 little-endian header length N, N bytes of JSON header, then the byte buffer.
Header: {"name": {"dtype": "F32", "shape": [...], "data_offsets": [begin, end]}, ...,
         "__metadata__": {str: str}} with offsets relative to the start of the buffer.

Writer conventions (mirrors the reference writer, so files look like HF ones):
  * tensors sorted by descending element size, then by name;
  * the JSON header is padded with spaces so that 8 + N is a multiple of 8;
  * every tensor is contiguous, little-endian, row-major, no holes between tensors;
  * `__metadata__` = {"format": "pt"} unless given.

BF16 is handled as raw uint16 bit patterns.  f32 -> bf16 conversion rounds to nearest,
ties to even (same as torch `.to(torch.bfloat16)`); bf16 -> f32 is exact (bits << 16).
"""

import json
import os
import struct

import numpy as np

# dtype name -> (numpy storage dtype, element size)
_DTYPES = {
    "F64": (np.dtype("<f8"), 8),
    "F32": (np.dtype("<f4"), 4),
    "F16": (np.dtype("<f2"), 2),
    "BF16": (np.dtype("<u2"), 2),  # raw bits
    "I64": (np.dtype("<i8"), 8),
    "I32": (np.dtype("<i4"), 4),
    "I16": (np.dtype("<i2"), 2),
    "I8": (np.dtype("i1"), 1),
    "U8": (np.dtype("u1"), 1),
}


class Tensor:
    """A tensor as stored: dtype name + numpy array of the *storage* dtype.

    For BF16 the array holds uint16 bit patterns.  Use `.to_f32()` to decode."""

    __slots__ = ("dtype", "data")

    def __init__(self, dtype, data):
        if dtype not in _DTYPES:
            raise ValueError("unsupported dtype %r" % dtype)
        data = np.ascontiguousarray(data, dtype=_DTYPES[dtype][0])
        self.dtype = dtype
        self.data = data

    @property
    def shape(self):
        return tuple(self.data.shape)

    def to_f32(self):
        if self.dtype == "BF16":
            return bf16_bits_to_f32(self.data)
        return self.data.astype(np.float32)

    def to_numpy(self):
        """float64 for float tensors (BF16/F16/F32 are exact in f64), native for ints."""
        if self.dtype in ("BF16", "F16", "F32", "F64"):
            return self.to_f32().astype(np.float64) if self.dtype != "F64" else self.data.copy()
        return self.data.copy()

    def __repr__(self):
        return "Tensor(%s, %s)" % (self.dtype, list(self.shape))


def f32_to_bf16_bits(x):
    """Round-to-nearest-even f32 -> bf16, returned as uint16 bits (NaN stays NaN)."""
    x = np.ascontiguousarray(x, dtype=np.float32)
    u = x.view(np.uint32).astype(np.uint64)
    rounding = ((u >> 16) & 1) + 0x7FFF
    r = ((u + rounding) >> 16).astype(np.uint16)
    nan = np.isnan(x)
    if nan.any():
        r[nan] = ((u[nan] >> 16) | 0x40).astype(np.uint16)  # quiet NaN
    return r


def bf16_bits_to_f32(b):
    b = np.ascontiguousarray(b, dtype=np.uint16)
    return (b.astype(np.uint32) << 16).view(np.float32)


def round_to_bf16(x):
    """f32 array -> f32 array holding the bf16-rounded values."""
    return bf16_bits_to_f32(f32_to_bf16_bits(x))


def make_tensor(arr, dtype):
    """Build a Tensor of `dtype` from a float/int numpy array (converting as needed)."""
    arr = np.asarray(arr)
    if dtype == "BF16":
        return Tensor("BF16", f32_to_bf16_bits(arr.astype(np.float32)))
    return Tensor(dtype, arr.astype(_DTYPES[dtype][0]))


def save_file(tensors, path, metadata=None):
    """tensors: dict name -> Tensor (or numpy array, stored as F32 / I32 by kind)."""
    items = []
    for name, t in tensors.items():
        if not isinstance(t, Tensor):
            a = np.asarray(t)
            t = make_tensor(a, "I32" if a.dtype.kind in "iu" else "F32")
        items.append((name, t))
    items.sort(key=lambda it: (-_DTYPES[it[1].dtype][1], it[0]))
    header = {}
    offset = 0
    for name, t in items:
        n = t.data.nbytes
        header[name] = {"dtype": t.dtype, "shape": list(t.shape), "data_offsets": [offset, offset + n]}
        offset += n
    header["__metadata__"] = dict(metadata) if metadata is not None else {"format": "pt"}
    hjson = json.dumps(header, separators=(",", ":"), sort_keys=False).encode("utf-8")
    pad = (-(8 + len(hjson))) % 8
    hjson += b" " * pad
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hjson)))
        f.write(hjson)
        for _, t in items:
            f.write(t.data.tobytes(order="C"))


def load_file(path):
    """Returns (dict name -> Tensor, metadata dict).  Validates offsets strictly."""
    with open(path, "rb") as f:
        raw = f.read()
    if len(raw) < 8:
        raise ValueError("%s: too short" % path)
    (n,) = struct.unpack("<Q", raw[:8])
    if n > 100_000_000 or 8 + n > len(raw):
        raise ValueError("%s: bad header length %d" % (path, n))
    header = json.loads(raw[8:8 + n].decode("utf-8"))
    buf = memoryview(raw)[8 + n:]
    meta = header.pop("__metadata__", {}) or {}
    spans = []
    out = {}
    for name, info in header.items():
        dt = info["dtype"]
        if dt not in _DTYPES:
            raise ValueError("%s: tensor %s has unsupported dtype %s" % (path, name, dt))
        npdt, size = _DTYPES[dt]
        shape = [int(s) for s in info["shape"]]
        b, e = (int(v) for v in info["data_offsets"])
        numel = int(np.prod(shape)) if shape else 1
        if not (0 <= b <= e <= len(buf)) or e - b != numel * size:
            raise ValueError("%s: tensor %s has bad offsets %r" % (path, name, (b, e)))
        spans.append((b, e))
        arr = np.frombuffer(buf[b:e], dtype=npdt).reshape(shape).copy()
        out[name] = Tensor(dt, arr)
    spans.sort()
    pos = 0
    for b, e in spans:
        if b != pos:
            raise ValueError("%s: hole or overlap in data buffer at %d" % (path, pos))
        pos = e
    if pos != len(buf):
        raise ValueError("%s: trailing bytes in data buffer" % path)
    return out, meta


def load_model_dir(d):
    """Load all tensors of an HF model directory (single file or index-sharded)."""
    idx = os.path.join(d, "model.safetensors.index.json")
    single = os.path.join(d, "model.safetensors")
    if os.path.exists(idx):
        with open(idx) as f:
            index = json.load(f)
        wm = index["weight_map"]
        tensors = {}
        for shard in sorted(set(wm.values())):
            part, _ = load_file(os.path.join(d, shard))
            for name, t in part.items():
                if wm.get(name) != shard:
                    raise ValueError("tensor %s found in %s but index says %s" % (name, shard, wm.get(name)))
                tensors[name] = t
        missing = set(wm) - set(tensors)
        if missing:
            raise ValueError("index lists tensors not found in shards: %s" % sorted(missing))
        return tensors
    tensors, _ = load_file(single)
    return tensors


def save_sharded(tensors, d, n_shards):
    """Split `tensors` (name -> Tensor) into n_shards files + model.safetensors.index.json.

    Tensors are assigned in sorted-name order, contiguous groups of roughly equal bytes."""
    names = sorted(tensors)
    total = sum(tensors[n].data.nbytes for n in names)
    target = total / n_shards
    groups = [[] for _ in range(n_shards)]
    acc = 0
    for n in names:
        gi = min(int(acc / target), n_shards - 1) if target > 0 else 0
        groups[gi].append(n)
        acc += tensors[n].data.nbytes
    weight_map = {}
    for i, g in enumerate(groups):
        fname = "model-%05d-of-%05d.safetensors" % (i + 1, n_shards)
        save_file({n: tensors[n] for n in g}, os.path.join(d, fname))
        for n in g:
            weight_map[n] = fname
    index = {"metadata": {"total_size": total}, "weight_map": dict(sorted(weight_map.items()))}
    with open(os.path.join(d, "model.safetensors.index.json"), "w") as f:
        json.dump(index, f, indent=2)
        f.write("\n")
