"""opends.safetensors against the safetensors package: files written by
safetensors (numpy, torch where installed, serialize_file for F4) load with
the same names, dtypes, shapes and bytes; the same files it rejects are
rejected; and the loader's options (copy, keys, safe_open, sharded index).
Skips where the safetensors package is not installed."""
import json
import os
import struct

import numpy as np
import pytest

from opends import safetensors as ost

st = pytest.importorskip("safetensors")
stn = pytest.importorskip("safetensors.numpy")

pytestmark = pytest.mark.usefixtures("driver")

# safetensors name -> the NumPy/ml_dtypes type safetensors.numpy writes it from
NUMPY_NAMES = {
    "BOOL": "bool",
    "U8": "uint8",
    "I8": "int8",
    "I16": "int16",
    "U16": "uint16",
    "I32": "int32",
    "U32": "uint32",
    "I64": "int64",
    "U64": "uint64",
    "F16": "float16",
    "F32": "float32",
    "F64": "float64",
    "C64": "complex64",
    "BF16": "bfloat16",
    "F8_E4M3": "float8_e4m3fn",
    "F8_E4M3FNUZ": "float8_e4m3fnuz",
    "F8_E5M2": "float8_e5m2",
    "F8_E5M2FNUZ": "float8_e5m2fnuz",
    "F8_E8M0": "float8_e8m0fnu",
}
SHAPES = [(3, 5, 7), (1,), (), (0, 4), (129,), (2, 2, 2, 2)]


def _np_dtype(name):
    n = NUMPY_NAMES[name]
    if hasattr(np, n):
        return np.dtype(n)
    ml = pytest.importorskip("ml_dtypes")
    return np.dtype(getattr(ml, n))


def _random(dt, shape, seed):
    n = int(np.prod(shape)) if shape else 1
    raw = np.random.default_rng(seed).integers(0, 256, n * dt.itemsize, dtype=np.uint8)
    if dt == np.dtype(bool):
        raw = raw % 2
    return raw.view(dt).reshape(shape)


def _header(path):
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        return json.loads(f.read(n))


def test_every_dtype_safetensors_writes_loads_the_same(tmp_path):
    """Every dtype, written by safetensors.numpy (and F4 by serialize_file)."""
    arrays = {}
    for i, name in enumerate(NUMPY_NAMES):
        for j, shape in enumerate(SHAPES):
            arrays["%s.%d" % (name.lower(), j)] = _random(_np_dtype(name), shape, 10 * i + j)
    p = str(tmp_path / "ref.safetensors")
    stn.save_file(arrays, p, metadata={"format": "np", "k": "v"})
    f4 = np.random.default_rng(5).integers(0, 256, (4, 3), dtype=np.uint8)
    hdr = _header(p)
    # every safetensors dtype name the file holds is one opends knows, and back
    assert {e["dtype"] for k, e in hdr.items() if k != "__metadata__"} == set(NUMPY_NAMES)
    got = ost.load_file(p, framework="numpy")
    assert list(got) == [k for k in hdr if k != "__metadata__"]  # the file's order
    with st.safe_open(p, framework="np") as ref:
        assert sorted(got) == sorted(ref.keys())
    for k, a in arrays.items():
        g = got[k]
        assert g.dtype == a.dtype and g.shape == a.shape, k
        assert g.tobytes() == a.tobytes(), k
    infos, meta, _ = ost.read_header(p)
    assert meta == {"format": "np", "k": "v"}

    p4 = str(tmp_path / "f4.safetensors")
    spec = st.TensorSpec(dtype="float4_e2m1fn_x2", shape=[4, 3], data_ptr=f4.ctypes.data, data_len=f4.nbytes)
    st.serialize_file({"f4": spec}, p4)
    assert _header(p4)["f4"]["shape"] == [4, 6]  # logical: two values a byte
    g = ost.load_file(p4, framework="numpy")["f4"]
    assert g.dtype == np.uint8 and g.shape == (4, 3) and g.tobytes() == f4.tobytes()


def test_torch_every_dtype_matches_safetensors_torch(tmp_path):
    torch = pytest.importorskip("torch")
    stt = pytest.importorskip("safetensors.torch")
    names = {
        "BOOL": "bool", "U8": "uint8", "I8": "int8", "I16": "int16", "U16": "uint16", "I32": "int32",
        "U32": "uint32", "I64": "int64", "U64": "uint64", "F16": "float16", "BF16": "bfloat16",
        "F32": "float32", "F64": "float64", "C64": "complex64", "F8_E4M3": "float8_e4m3fn",
        "F8_E4M3FNUZ": "float8_e4m3fnuz", "F8_E5M2": "float8_e5m2", "F8_E5M2FNUZ": "float8_e5m2fnuz",
        "F8_E8M0": "float8_e8m0fnu", "F4": "float4_e2m1fn_x2",
    }  # fmt: skip
    tensors = {}
    for i, (name, attr) in enumerate(names.items()):
        dt = getattr(torch, attr, None)
        if dt is None:
            continue
        for j, shape in enumerate(SHAPES[:5]):
            if name == "F4" and not shape:
                continue
            n = int(np.prod(shape)) if shape else 1
            raw = torch.from_numpy(np.random.default_rng(i * 10 + j).integers(0, 256, n * dt.itemsize, dtype=np.uint8))
            if not n:  # an empty array from NumPy 2 has stride 0, which view() refuses
                raw = torch.empty(0, dtype=torch.uint8)
            if name == "BOOL":
                raw = raw % 2
            tensors["%s.%d" % (name.lower(), j)] = raw.view(dt).reshape(shape)
    p = str(tmp_path / "torch.safetensors")
    stt.save_file(tensors, p)
    ref = stt.load_file(p)
    for copy in (False, True):
        got = ost.load_file(p, framework="torch", copy=copy)
        assert sorted(got) == sorted(ref)
        for k, r in ref.items():
            g = got[k]
            assert g.dtype == r.dtype and g.shape == r.shape, k
            assert g.reshape(-1).view(torch.uint8).numpy().tobytes() == r.reshape(-1).view(torch.uint8).numpy().tobytes(), k
        if copy:
            t = next(iter(got.values()))
            assert t.untyped_storage().nbytes() == t.numel() * t.element_size()


def _raw_file(path, header, data=b""):
    hb = json.dumps(header).encode() if not isinstance(header, bytes) else header
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hb)) + hb + data)


def test_duplicate_keys_rejected_like_safetensors(tmp_path):
    p = str(tmp_path / "dup.safetensors")
    e = '{"dtype":"U8","shape":[2],"data_offsets":[%d,%d]}'
    _raw_file(p, ('{"a":%s,"a":%s}' % (e % (0, 2), e % (2, 4))).encode(), b"abcd")
    with pytest.raises(Exception):
        with st.safe_open(p, framework="np") as f:
            f.keys()
    with pytest.raises(ost.HeaderError, match="duplicate key 'a'"):
        ost.load_file(p, framework="numpy")


def test_copy_gives_each_tensor_its_own_storage(tmp_path):
    arrays = {"a": np.arange(1000, dtype=np.float32), "b": np.arange(10, dtype=np.int16)}
    p = str(tmp_path / "c.safetensors")
    stn.save_file(arrays, p)
    shared = ost.load_file(p, framework="numpy")
    assert shared["a"].base is not None and shared["a"].base is shared["b"].base  # one buffer
    own = ost.load_file(p, framework="numpy", copy=True)
    assert own["a"].base is None and own["b"].base is None
    for k in arrays:
        assert np.array_equal(own[k], arrays[k]) and np.array_equal(shared[k], arrays[k])


def test_subset_and_safe_open(tmp_path):
    rng = np.random.default_rng(3)
    arrays = {"t%03d" % i: rng.standard_normal(1000 + 999 * i).astype(np.float32) for i in range(40)}
    p = str(tmp_path / "s.safetensors")
    stn.save_file(arrays, p, metadata={"who": "me"})
    keys = ["t039", "t000", "t017"]
    got = ost.load_file(p, framework="numpy", keys=keys)
    assert list(got) == keys
    for k in keys:
        assert np.array_equal(got[k], arrays[k])
    with pytest.raises(KeyError, match="nope"):
        ost.load_file(p, framework="numpy", keys=["nope"])
    with ost.safe_open(p, framework="np") as f, st.safe_open(p, framework="np") as ref:
        assert f.keys() == list(ref.keys()) and f.metadata() == ref.metadata()
        for k in ("t005", "t031"):
            a = f.get_tensor(k)
            assert np.array_equal(a, ref.get_tensor(k)) and a.nbytes == arrays[k].nbytes


def test_sharded_index(tmp_path):
    rng = np.random.default_rng(4)
    shards = [{"s%d.t%d" % (s, i): rng.standard_normal(100 * (i + 1)).astype(np.float32) for i in range(5)} for s in range(3)]
    wm = {}
    for s, arrays in enumerate(shards):
        name = "model-%05d-of-00003.safetensors" % (s + 1)
        stn.save_file(arrays, str(tmp_path / name))
        wm.update({k: name for k in arrays})
    idx = tmp_path / "model.safetensors.index.json"
    idx.write_text(json.dumps({"metadata": {"total_size": 0}, "weight_map": wm}))
    got = ost.load_file(str(idx), framework="numpy")
    assert sorted(got) == sorted(wm)
    for arrays in shards:
        for k, a in arrays.items():
            assert np.array_equal(got[k], a)
    sub = ost.load_file(str(idx), framework="numpy", keys=["s2.t4", "s0.t0"])
    assert sorted(sub) == ["s0.t0", "s2.t4"] and np.array_equal(sub["s2.t4"], shards[2]["s2.t4"])
    idx.write_text(json.dumps({"weight_map": {"x": "../evil.safetensors"}}))
    with pytest.raises(ost.HeaderError, match="outside"):
        ost.load_file(str(idx), framework="numpy")
