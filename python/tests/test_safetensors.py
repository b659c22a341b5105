"""opends.safetensors on files this test writes by hand (struct + json),
run once per available (backend, accel) pair."""
import json
import struct

import numpy as np
import pytest

import opends
from opends import safetensors as ost

pytestmark = pytest.mark.usefixtures("driver")

# safetensors dtype -> NumPy dtype for the types NumPy has
NP_TYPES = {
    "BOOL": "?",
    "U8": "u1",
    "I8": "i1",
    "I16": "<i2",
    "U16": "<u2",
    "I32": "<i4",
    "U32": "<u4",
    "I64": "<i8",
    "U64": "<u8",
    "F16": "<f2",
    "F32": "<f4",
    "F64": "<f8",
    "C64": "<c8",
}


def write_safetensors(path, tensors, metadata=None, pad_header=True, gap_before=None):
    """Write tensors ({name: (dtype_name, shape, raw bytes)}) in the
    safetensors layout; gap_before={name: n} inserts n junk bytes before a
    tensor (so later offsets can be misaligned). Returns the header dict."""
    header, blobs, off = {}, [], 0
    for name, (dt, shape, raw) in tensors.items():
        g = (gap_before or {}).get(name, 0)
        if g == "odd":  # place the tensor at an offset = 1 mod 8
            g = (1 - off) % 8
        if g:
            blobs.append(b"\xab" * g)
            off += g
        header[name] = {"dtype": dt, "shape": list(shape), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    if metadata is not None:
        header["__metadata__"] = metadata
    hb = json.dumps(header).encode()
    if pad_header:
        hb += b" " * (-len(hb) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hb)) + hb + b"".join(blobs))
    return header


def sample(dt, shape, seed):
    rng = np.random.default_rng(seed)
    n = int(np.prod(shape)) if shape else 1
    if dt == "BOOL":
        a = rng.integers(0, 2, n).astype("?")
    elif dt in ("F16", "F32", "F64"):
        a = rng.standard_normal(n).astype(NP_TYPES[dt])
    elif dt == "C64":
        a = (rng.standard_normal(n) + 1j * rng.standard_normal(n)).astype("<c8")
    else:
        a = rng.integers(0, 256, n * np.dtype(NP_TYPES[dt]).itemsize, dtype=np.uint8).view(NP_TYPES[dt])
    return a.reshape(shape)


@pytest.fixture
def allfile(tmp_path):
    """A file with every NumPy-expressible dtype, odd shapes, a 0-d scalar,
    an empty tensor, BF16/F8 raw bits, and misaligned tensors."""
    arrays = {}
    tensors = {}
    for i, (dt, npdt) in enumerate(NP_TYPES.items()):
        shape = [(3, 5, 7), (1,), (), (0, 4), (129,)][i % 5]
        a = sample(dt, shape, i)
        arrays["t_" + dt.lower()] = a
        tensors["t_" + dt.lower()] = (dt, shape, a.tobytes())
    bf = np.random.default_rng(99).integers(0, 1 << 16, (4, 6), dtype=np.uint16)
    tensors["t_bf16"] = ("BF16", (4, 6), bf.astype("<u2").tobytes())
    f8 = np.arange(256, dtype=np.uint8)
    tensors["t_f8e4m3"] = ("F8_E4M3", (256,), f8.tobytes())
    tensors["t_f8e5m2"] = ("F8_E5M2", (16, 16), f8.tobytes())
    # misaligned: an I32 and an F64 at offsets = 1 mod 8
    mis32 = sample("I32", (11,), 50)
    mis64 = sample("F64", (3, 3), 51)
    tensors["mis_i32"] = ("I32", (11,), mis32.tobytes())
    tensors["mis_f64"] = ("F64", (3, 3), mis64.tobytes())
    p = tmp_path / "all.safetensors"
    header = write_safetensors(p, tensors, metadata={"format": "pt"}, gap_before={"mis_i32": "odd", "mis_f64": "odd"})
    assert header["mis_i32"]["data_offsets"][0] % 4 != 0
    assert header["mis_f64"]["data_offsets"][0] % 8 != 0
    return str(p), tensors


def test_numpy_every_dtype(allfile):
    path, tensors = allfile
    out = ost.load_file(path, framework="numpy")
    assert set(out) == set(tensors)
    for name, (dt, shape, raw) in tensors.items():
        a = out[name]
        assert a.shape == tuple(shape), name
        assert a.tobytes() == raw, name
        if dt in NP_TYPES:
            assert a.dtype == np.dtype(NP_TYPES[dt]), name
        assert a.ctypes.data % a.dtype.itemsize == 0, name  # aligned (copied if needed)
    try:
        import ml_dtypes

        assert out["t_bf16"].dtype == ml_dtypes.bfloat16
    except ImportError:
        assert out["t_bf16"].dtype == np.uint16  # documented fallback
        assert out["t_f8e4m3"].dtype == np.uint8
    # aligned tensors are views of one buffer; misaligned ones are copies
    def root(a):
        while a.base is not None and isinstance(a.base, np.ndarray):
            a = a.base
        return a

    infos, _, _ = ost.read_header(path)
    shared = {id(root(out[n])) for n, t in infos.items() if t.begin % t.itemsize == 0 and t.end > t.begin}
    assert len(shared) == 1
    copies = [n for n, t in infos.items() if t.begin % t.itemsize]
    assert "mis_i32" in copies and "mis_f64" in copies
    for n in copies:
        assert id(root(out[n])) not in shared


def test_small_pieces(tmp_path):
    a = sample("F32", (1000, 33), 7)
    b = sample("I16", (12345,), 8)
    p = tmp_path / "p.safetensors"
    write_safetensors(p, {"a": ("F32", a.shape, a.tobytes()), "b": ("I16", b.shape, b.tobytes())})
    out = ost.load_file(p, framework="numpy", piece_size=4096 + 7)
    np.testing.assert_array_equal(out["a"], a)
    np.testing.assert_array_equal(out["b"], b)


def test_header_and_empty_file(tmp_path):
    p = tmp_path / "e.safetensors"
    write_safetensors(p, {}, metadata={"k": "v"})
    assert ost.load_file(p, framework="numpy") == {}
    infos, meta, start = ost.read_header(p)
    assert infos == {} and meta == {"k": "v"} and start % 8 == 0


def _raw_file(path, header_bytes, data=b"", length=None):
    n = len(header_bytes) if length is None else length
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", n) + header_bytes + data)


@pytest.mark.parametrize(
    "case, match",
    [
        ("short", "shorter than the 8-byte"),
        ("hdr_past_eof", "runs past the end"),
        ("huge_hdr", "above the"),
        ("bad_json", "not valid UTF-8 JSON"),
        ("not_object", "not an object"),
        ("unknown_dtype", "unknown dtype 'Q8'"),
        ("shape_mismatch", "needs 24 bytes"),
        ("out_of_range", "run past the 16-byte data region"),
        ("overlap", "overlap"),
        ("reversed", "end before"),
        ("bad_shape", "not a list of non-negative"),
        ("truncated_data", "run past"),
    ],
)
def test_header_errors(tmp_path, case, match):
    p = tmp_path / ("%s.safetensors" % case)
    ok = {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}
    if case == "short":
        p.write_bytes(b"\x05\x00\x00")
    elif case == "hdr_past_eof":
        _raw_file(p, b'{"a":', length=4096)  # truncated header
    elif case == "huge_hdr":
        _raw_file(p, b"{}", length=1 << 40)
    elif case == "bad_json":
        _raw_file(p, b'{"a": {"dtype": "F32",,}}')
    elif case == "not_object":
        _raw_file(p, b"[1, 2]")
    else:
        h = {"a": dict(ok)}
        data = bytes(16)
        if case == "unknown_dtype":
            h["a"]["dtype"] = "Q8"
        elif case == "shape_mismatch":
            h["a"]["shape"] = [2, 3]
        elif case == "out_of_range":
            h["a"]["data_offsets"] = [8, 24]
            h["a"]["shape"] = [4]
        elif case == "overlap":
            h["b"] = {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}
        elif case == "reversed":
            h["a"]["data_offsets"] = [8, 0]
        elif case == "bad_shape":
            h["a"]["shape"] = [2, -1]
        elif case == "truncated_data":
            h["a"] = {"dtype": "F32", "shape": [8], "data_offsets": [0, 32]}
        _raw_file(p, json.dumps(h).encode(), data)
    with pytest.raises(ost.HeaderError, match=match) as ei:
        ost.load_file(p, framework="numpy")
    assert str(p) in str(ei.value)
    assert isinstance(ei.value, ValueError)


def test_torch_cpu_matches(allfile, tmp_path):
    torch = pytest.importorskip("torch")
    path, tensors = allfile
    out = ost.load_file(path, device="cpu", framework="torch")
    for name, (dt, shape, raw) in tensors.items():
        t = out[name]
        assert tuple(t.shape) == tuple(shape)
        assert t.contiguous().reshape(-1).view(torch.uint8).numpy().tobytes() == raw, name
    try:
        from safetensors.torch import load_file as ref_load
    except ImportError:
        return
    # the reference loader refuses gaps between tensors (this loader allows
    # them), so compare on the same tensors written back to back
    path = str(tmp_path / "nogap.safetensors")
    write_safetensors(path, tensors)
    out = ost.load_file(path, device="cpu", framework="torch")
    ref = ref_load(path, device="cpu")
    assert set(ref) == set(out)
    for name in ref:
        assert ref[name].dtype == out[name].dtype and ref[name].shape == out[name].shape
        assert ref[name].reshape(-1).view(torch.uint8).equal(out[name].reshape(-1).view(torch.uint8)), name


def test_device_without_torch_rejected(allfile):
    path, _ = allfile
    with pytest.raises(ValueError):
        ost.load_file(path, device="cuda", framework="numpy")
    with pytest.raises(ValueError):
        ost.load_file(path, framework="jax")


def _layout_file(tmp_path):
    """Interleaved dtypes with gaps, 2-D/0-d shapes, a misaligned tensor,
    empty ones, and a header listing tensors out of file order: every case
    the list-at-a-time route (opends._stfast) hands to the per-entry one."""
    ts = {}
    for i in range(60):
        dt = ["F16", "F32", "U8", "I64", "BF16"][i % 5]
        shape = [(5,), (2, 3), (), (0,), (3, 1, 2)][i % 5]
        raw = sample(dt if dt != "BF16" else "U16", shape, i).tobytes()
        ts["t%02d" % i] = (dt, shape, raw)
    gaps = {"t07": 24, "t21": "odd", "t33": 3}
    hdr = write_safetensors(tmp_path / "a.safetensors", ts, gap_before=gaps)
    # the same data, header entries in reverse order
    items = list(hdr.items())[::-1]
    data = (tmp_path / "a.safetensors").read_bytes()
    (n,) = struct.unpack("<Q", data[:8])
    hb = json.dumps(dict(items)).encode()
    hb += b" " * (-len(hb) % 8)
    (tmp_path / "b.safetensors").write_bytes(struct.pack("<Q", len(hb)) + hb + data[8 + n :])
    return ts, hdr


@pytest.mark.parametrize("parser", ["c", "json", "orjson"])
def test_layouts_load_byte_exact(tmp_path, parser, monkeypatch):
    from opends import _stfast, _stindex

    if parser != "c":  # the Python parser: the C indexer off
        monkeypatch.setattr(_stindex, "ENABLED", False)
    if parser == "json":
        monkeypatch.setattr(_stfast, "_orjson", None)
    elif parser == "orjson" and _stfast._orjson is None:
        pytest.skip("orjson is not installed")
    ts, hdr = _layout_file(tmp_path)
    for name in ("a", "b"):
        for copy in (False, True):
            got = ost.load_file(str(tmp_path / ("%s.safetensors" % name)), framework="numpy", copy=copy)
            # (b lists its tensors out of file order: always the Python parser's)
            c = parser == "c" and name == "a" and _stindex._functions() is not None
            assert (_stfast.last_phases["parser"] == "c") == c, (name, _stfast.last_phases["parser"])
            assert list(got) == (list(hdr) if name == "a" else list(hdr)[::-1])
            for k, (dt, shape, raw) in ts.items():
                assert got[k].shape == tuple(shape) and got[k].tobytes() == raw, (name, k)
    torch = pytest.importorskip("torch")
    for name in ("a", "b"):
        got = ost.load_file(str(tmp_path / ("%s.safetensors" % name)), framework="torch")
        for k, (dt, shape, raw) in ts.items():
            t = got[k]
            assert tuple(t.shape) == tuple(shape) and t.is_contiguous(), (name, k)
            assert t.reshape(-1).view(torch.uint8).numpy().tobytes() == raw, (name, k)


@pytest.fixture(params=["c", "numpy", "lists"])
def checks(request, monkeypatch):
    """The header indexed in C; the list-at-a-time route's checks and
    grouping as NumPy array operations (where NumPy is installed) and as
    list passes (where not)."""
    from opends import _stfast, _stindex

    if request.param != "c":
        monkeypatch.setattr(_stindex, "ENABLED", False)
    if request.param == "lists":
        monkeypatch.setattr(_stfast, "_numpy_mod", [None])
    else:
        monkeypatch.setattr(_stfast, "_numpy_mod", [np])
    return request.param


def test_list_route_refuses_what_the_entry_checks_refuse(checks):
    from opends import _stfast

    ok = {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}
    assert _stfast.table({"a": ok}, ost._BITS, 8) is not None
    bad = [
        {"a": dict(ok, dtype="Q8")},
        {"a": dict(ok, shape=[3])},
        {"a": dict(ok, shape=[True, 2])},
        {"a": dict(ok, shape=[-2, -1])},
        {"a": dict(ok, shape="2")},
        {"a": dict(ok, data_offsets=[0, 8.0])},
        {"a": dict(ok, data_offsets=[False, 8])},
        {"a": dict(ok, data_offsets=[0, 8, 9])},
        {"a": dict(ok, data_offsets=[8, 0])},
        {"a": dict(ok, data_offsets=[0, 16], shape=[4])},  # past the 8-byte region
        {"a": {"dtype": "F32", "shape": [2]}},
        {"a": [1]},
        {"a": ok, "b": dict(ok, data_offsets=[4, 12])},  # overlap
        {"a": dict(ok, dtype=["F32"])},
        {"a": dict(ok, data_offsets=[0, 1 << 64], shape=[1 << 61])},  # past int64
        {"a": dict(ok, shape=[1 << 62, 4], data_offsets=[0, 0])},  # a product past int64
        {"a": ok, "b": dict(ok, data_offsets=[8, 12], shape=[2])},  # a size that is not the shape's
        {"a": ok, "b": dict(ok, dtype="F64", data_offsets=[8, 12], shape=[1])},  # the same, two dtypes
    ]
    for h in bad:
        assert _stfast.table(h, ost._BITS, 12 if "b" in h else 8) is None, h


@pytest.mark.parametrize("dt", ["U8", "F32"])
@pytest.mark.parametrize("shapes", ["1d", "mixed", "2d"])
def test_one_dtype_back_to_back(tmp_path, dt, shapes):
    """One dtype, tensors back to back: one split (mostly 1-D) or shapes
    evenly spaced / not; both frameworks, byte for byte."""
    pick = {"1d": lambda i: (i % 7 + 1,), "mixed": lambda i: (i % 7 + 1,) if i % 5 else (2, i % 3 + 1),
            "2d": lambda i: (2, i % 3 + 1) if i % 2 else (4, 4)}[shapes]  # fmt: skip
    ts = {"t%03d" % i: (dt, pick(i), sample(dt, pick(i), i).tobytes()) for i in range(100)}
    p = tmp_path / "one.safetensors"
    write_safetensors(p, ts)
    got = ost.load_file(str(p), framework="numpy")
    for k, (_, shape, raw) in ts.items():
        assert got[k].shape == shape and got[k].tobytes() == raw, k
    torch = pytest.importorskip("torch")
    got = ost.load_file(str(p), framework="torch")
    for k, (_, shape, raw) in ts.items():
        t = got[k]
        assert tuple(t.shape) == shape and t.is_contiguous(), k
        assert t.reshape(-1).view(torch.uint8).numpy().tobytes() == raw, k


def _mixed_file(tmp_path):
    """Every route of the list-at-a-time loader in one file: three dtypes
    cycling against four shapes (duplicate shapes evenly spaced: unbind),
    a run of one dtype's 1-D tensors back to back (split), a run of
    distinct shapes (one view each), a 0-d, an empty and a misaligned one."""
    ts = {}
    for i in range(50):  # first: the split starts at the buffer's start
        ts["run.%02d" % i] = ("I16", (i % 9 + 1,), sample("I16", (i % 9 + 1,), 300 + i).tobytes())
    shapes = [(4,), (2, 3), (3, 2), (1, 1, 5)]
    for i in range(240):
        dt = ["F32", "BF16", "U8"][i % 3]
        ts["cyc.%03d" % i] = (dt, shapes[i % 4], sample(dt if dt != "BF16" else "U16", shapes[i % 4], i).tobytes())
    for i in range(30):
        s = (i + 1, 2) if i % 2 else (3, i + 1)
        ts["own.%02d" % i] = ("F64", s, sample("F64", s, 400 + i).tobytes())
    ts["zero_d"] = ("I64", (), sample("I64", (), 500).tobytes())
    ts["empty"] = ("F32", (0, 3), b"")
    ts["mis"] = ("I32", (7,), sample("I32", (7,), 501).tobytes())
    hdr = write_safetensors(tmp_path / "mixed.safetensors", ts, gap_before={"mis": "odd"})
    return str(tmp_path / "mixed.safetensors"), ts, hdr


def test_read_after_parse_same_tensors(tmp_path, monkeypatch):
    """READ_FIRST = False (the data read started after the views are made)
    and READ_AFTER_INDEX = True (started once the header is indexed) give
    the same tensors, byte for byte, as the default order."""
    from opends import _stfast

    path, ts, hdr = _mixed_file(tmp_path)
    for fw in ("numpy", "torch"):
        if fw == "torch":
            pytest.importorskip("torch")
        monkeypatch.setattr(_stfast, "READ_FIRST", False)
        a = ost.load_file(path, framework=fw)
        monkeypatch.setattr(_stfast, "READ_AFTER_INDEX", True)  # (no effect without READ_FIRST)
        a2 = ost.load_file(path, framework=fw)
        monkeypatch.setattr(_stfast, "READ_FIRST", True)
        c = ost.load_file(path, framework=fw)  # the read started once the header is indexed
        monkeypatch.setattr(_stfast, "READ_AFTER_INDEX", False)
        b = ost.load_file(path, framework=fw)
        assert list(a) == list(a2) == list(b) == list(c) == list(hdr)
        for k, (dt, shape, raw) in ts.items():
            for got in (a, a2, c):
                x = got[k] if fw == "numpy" else got[k].reshape(-1).view(dtype=__import__("torch").uint8).numpy()
                assert tuple(got[k].shape) == tuple(b[k].shape) == shape and x.tobytes() == raw, k


def test_list_route_equals_entry_route(tmp_path, checks):
    """The whole-file route (_stfast: views made a dtype group at a time)
    and the per-entry route (load_file(keys=...): one view per tensor) give
    the same tensors, dtype, shape and bytes, in the header's order; the
    whole-file route's aligned tensors all share the one buffer (no
    per-tensor copy or device work)."""
    path, ts, hdr = _mixed_file(tmp_path)
    keys = list(hdr)
    a = ost.load_file(path, framework="numpy")
    b = ost.load_file(path, framework="numpy", keys=keys)
    assert list(a) == keys and list(b) == keys
    for k in keys:
        assert a[k].dtype == b[k].dtype and a[k].shape == b[k].shape == ts[k][1], k
        assert a[k].tobytes() == b[k].tobytes() == ts[k][2], k
    torch = pytest.importorskip("torch")
    a = ost.load_file(path, framework="torch")
    b = ost.load_file(path, framework="torch", keys=keys)
    assert list(a) == keys and list(b) == keys
    bases = set()
    for k in keys:
        x, y = a[k], b[k]
        assert x.dtype == y.dtype and tuple(x.shape) == tuple(y.shape) == ts[k][1], k
        assert x.is_contiguous() and y.is_contiguous(), k
        assert x.reshape(-1).view(torch.uint8).numpy().tobytes() == ts[k][2], k
        assert y.reshape(-1).view(torch.uint8).numpy().tobytes() == ts[k][2], k
        b0, b1 = hdr[k]["data_offsets"]
        if b1 > b0 and b0 % ost._itemsize(hdr[k]["dtype"]) == 0:  # (misaligned ones are copied)
            bases.add(x.untyped_storage().data_ptr())
            assert x._base is None, k  # made below autograd's view tracking, as documented
    assert len(bases) == 1
    a["cyc.000"].add_(1)  # its own version counter: the neighbours' stay
    assert a["cyc.000"]._version == 1 and a["cyc.003"]._version == 0 and a["run.00"]._version == 0
    from opends import _stfast

    ph = _stfast.last_phases  # the breakdown python/bench_many_tensors.py prints
    assert ph["tensors"] == len(keys) and all(ph[p] >= 0 for p in ("head", "json", "table", "views", "wait"))


@pytest.mark.parametrize("order", ["turns", "irregular"])
def test_groups_back_in_header_order(tmp_path, order):
    """Several dtypes, every tensor aligned and non-empty: the views are
    made a dtype at a time and put back in the header's order, by slice
    assignment where each dtype's tensors are evenly spaced in the header
    (dtypes taking turns) and by a sort where not. Same names, order,
    shapes and bytes either way."""
    torch = pytest.importorskip("torch")
    dts = ["F16", "U8", "F32", "I64"]
    rng = np.random.default_rng(7)
    pick = list(range(400)) if order == "turns" else rng.integers(0, 4, 400).tolist()
    ts = {}
    for i, k in enumerate(pick):
        dt = dts[k % 4]
        shape = (8 * (i % 5 + 1),) if i % 3 else (2, 4 * (i % 4 + 1))  # (8-byte multiples: all aligned)
        ts["t.%03d" % i] = (dt, shape, sample(dt, shape, i).tobytes())
    hdr = write_safetensors(tmp_path / "g.safetensors", ts)
    got = ost.load_file(str(tmp_path / "g.safetensors"), framework="torch")
    assert list(got) == list(hdr)
    assert len({t.untyped_storage().data_ptr() for t in got.values()}) == 1  # none copied: all aligned
    for k, (dt, shape, raw) in ts.items():
        t = got[k]
        assert tuple(t.shape) == shape and t.dtype == ost._torch_dtype(torch, dt), k
        assert t.reshape(-1).view(torch.uint8).numpy().tobytes() == raw, k
