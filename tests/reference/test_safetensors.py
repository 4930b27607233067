import json
import struct

import numpy as np
import pytest
import torch

from mcserve_ref import safetensors_io as st


def _header(path):
    raw = open(path, "rb").read()
    (n,) = struct.unpack("<Q", raw[:8])
    return n, json.loads(raw[8:8 + n])


def test_round_trip_all_dtypes(tmp_path):
    rng = np.random.RandomState(0)
    a32 = rng.normal(size=(3, 5)).astype(np.float32)
    tensors = {
        "f32": st.make_tensor(a32, "F32"),
        "f16": st.make_tensor(a32, "F16"),
        "bf16": st.make_tensor(a32, "BF16"),
        "i32": st.make_tensor(np.arange(7, dtype=np.int32) - 3, "I32"),
        "scalar": st.make_tensor(np.array(2.5, np.float32), "F32"),
        "empty": st.make_tensor(np.zeros((0, 4), np.float32), "F32"),
        "odd": st.make_tensor(np.ones(3, np.float32), "BF16"),   # 6 bytes: forces unaligned follow-up
    }
    p = tmp_path / "x.safetensors"
    st.save_file(tensors, str(p))
    back, meta = st.load_file(str(p))
    assert meta == {"format": "pt"}
    assert set(back) == set(tensors)
    for k, t in tensors.items():
        assert back[k].dtype == t.dtype and back[k].shape == t.shape
        assert back[k].data.tobytes() == t.data.tobytes()
    assert np.array_equal(back["f32"].to_f32(), a32)
    assert np.allclose(back["f16"].to_f32(), a32, atol=2e-3)
    assert np.allclose(back["bf16"].to_f32(), a32, rtol=1 / 128)
    n, h = _header(str(p))
    assert (8 + n) % 8 == 0
    h.pop("__metadata__")
    size = {"F32": 4, "F16": 2, "BF16": 2, "I32": 4}
    # descending element size, then name; offsets contiguous and element-aligned
    order = sorted(h, key=lambda k: h[k]["data_offsets"][0])
    assert order == sorted(h, key=lambda k: (-size[h[k]["dtype"]], k))
    for k in h:
        assert h[k]["data_offsets"][0] % size[h[k]["dtype"]] == 0


def test_bf16_rounding_matches_torch():
    rng = np.random.RandomState(1)
    x = np.concatenate([rng.normal(size=1000).astype(np.float32) * 10,
                        np.array([1.0 + 2 ** -8, 1.0 + 3 * 2 ** -8, -1.0 - 2 ** -8, 65504.0, 1e-30, 0.0, -0.0,
                                  3.4e38, np.inf, -np.inf], np.float32)])
    ours = st.f32_to_bf16_bits(x)
    ref = torch.from_numpy(x).to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)
    assert np.array_equal(ours, ref)
    assert np.array_equal(st.bf16_bits_to_f32(ours), torch.from_numpy(x).to(torch.bfloat16).float().numpy())


def test_reader_rejects_holes(tmp_path):
    p = tmp_path / "bad.safetensors"
    header = {"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
              "b": {"dtype": "F32", "shape": [1], "data_offsets": [12, 16]}}
    hj = json.dumps(header).encode()
    with open(p, "wb") as f:
        f.write(struct.pack("<Q", len(hj)) + hj + b"\0" * 16)
    with pytest.raises(ValueError):
        st.load_file(str(p))
    header["b"]["data_offsets"] = [8, 16]  # wrong byte count for shape [1]
    hj = json.dumps(header).encode()
    with open(p, "wb") as f:
        f.write(struct.pack("<Q", len(hj)) + hj + b"\0" * 16)
    with pytest.raises(ValueError):
        st.load_file(str(p))


def test_sharded_round_trip(tmp_path):
    rng = np.random.RandomState(2)
    tensors = {"w%d" % i: st.make_tensor(rng.normal(size=(i + 1, 3)), "F32") for i in range(6)}
    st.save_sharded(tensors, str(tmp_path), 2)
    idx = json.load(open(tmp_path / "model.safetensors.index.json"))
    assert sorted(set(idx["weight_map"].values())) == ["model-00001-of-00002.safetensors",
                                                       "model-00002-of-00002.safetensors"]
    assert idx["metadata"]["total_size"] == sum(t.data.nbytes for t in tensors.values())
    back = st.load_model_dir(str(tmp_path))
    assert set(back) == set(tensors)
    for k in tensors:
        assert back[k].data.tobytes() == tensors[k].data.tobytes()
