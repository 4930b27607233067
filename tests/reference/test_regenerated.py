"""The regenerated-fixture comparison: one F32 step on float64 goldens, exact everywhere else."""
import json
import os

import numpy as np
import pytest

from mcserve_ref import safetensors_io as st
from regenerated import assert_same_file


def _write(path, logits, weights, ids):
    st.save_file({"logits": st.make_tensor(logits, "F32"), "w": st.make_tensor(weights, "F32"),
                  "ids": st.make_tensor(ids, "I32")}, str(path))


@pytest.fixture
def committed(tmp_path):
    rng = np.random.RandomState(0)
    arrays = (rng.normal(size=(3, 5)).astype(np.float32), rng.normal(size=4).astype(np.float32),
              np.arange(6, dtype=np.int32))
    _write(tmp_path / "a.safetensors", *arrays)
    return tmp_path / "a.safetensors", arrays


def test_identical_and_one_step_logits_pass(committed, tmp_path):
    path, (logits, w, ids) = committed
    _write(tmp_path / "same.safetensors", logits, w, ids)
    assert_same_file(str(path), str(tmp_path / "same.safetensors"))
    moved = logits.copy()
    moved[1, 2] = np.nextafter(moved[1, 2], np.float32(np.inf))
    moved[2, 4] = np.nextafter(moved[2, 4], np.float32(-np.inf))
    _write(tmp_path / "b.safetensors", moved, w, ids)
    assert_same_file(str(path), str(tmp_path / "b.safetensors"))


@pytest.mark.parametrize("what", ["logits_two_steps", "weight_one_step", "ids", "extra_tensor"])
def test_anything_else_fails(committed, tmp_path, what):
    path, (logits, w, ids) = committed
    logits, w, ids = logits.copy(), w.copy(), ids.copy()
    if what == "logits_two_steps":
        logits[0, 0] = np.nextafter(np.nextafter(logits[0, 0], np.float32(np.inf)), np.float32(np.inf))
    elif what == "weight_one_step":
        w[3] = np.nextafter(w[3], np.float32(np.inf))
    elif what == "ids":
        ids[5] = 7
    out = tmp_path / "b.safetensors"
    if what == "extra_tensor":
        st.save_file({"logits": st.make_tensor(logits, "F32"), "w": st.make_tensor(w, "F32"),
                      "ids": st.make_tensor(ids, "I32"), "x": st.make_tensor(w, "F32")}, str(out))
    else:
        _write(out, logits, w, ids)
    with pytest.raises(AssertionError):
        assert_same_file(str(path), str(out))


def test_json_margins_within_one_rounding_step(tmp_path):
    a, b, c = tmp_path / "a.json", tmp_path / "b.json", tmp_path / "c.json"
    a.write_text(json.dumps({"greedy_ids": [3, 4], "min_greedy_margin": 0.123456}))
    b.write_text(json.dumps({"greedy_ids": [3, 4], "min_greedy_margin": 0.123457}))
    c.write_text(json.dumps({"greedy_ids": [3, 5], "min_greedy_margin": 0.123456}))
    assert_same_file(str(a), str(b))
    with pytest.raises(AssertionError):
        assert_same_file(str(a), str(c))
    b.write_text(json.dumps({"greedy_ids": [3, 4], "min_greedy_margin": 0.123458}))
    with pytest.raises(AssertionError):
        assert_same_file(str(a), str(b))


def test_other_files_must_match_byte_for_byte(tmp_path):
    (tmp_path / "a.model").write_bytes(b"abc")
    (tmp_path / "b.model").write_bytes(b"abd")
    with pytest.raises(AssertionError):
        assert_same_file(str(tmp_path / "a.model"), str(tmp_path / "b.model"))
