"""The C header indexer (src/formats/st_index.c through opends._stindex)
against the Python parser and the safetensors package, on generated and
corrupted headers: whatever the indexer accepts, the Python parser accepts
with the same names, dtypes, shapes and offsets; whatever the Python parser
rejects, the indexer does not index; load_file gives the same tensors or the
same error with the indexer on and off."""
import json
import random
import struct

import numpy as np
import pytest

from opends import _stfast, _stindex
from opends import safetensors as ost


def test_the_library_has_the_indexer():
    """The package's libopends is of its own version (opends._lib checks):
    it has the indexer, so nothing here skips for want of it."""
    assert _stindex._functions() is not None


def index(hdr: bytes, data_len: int):
    return _stindex.table(struct.pack("<Q", len(hdr)) + hdr, len(hdr), data_len, ost._BITS)


def parse(hdr: bytes, data_len: int):
    """The Python parser's table, or the HeaderError (or other error) it raises."""
    head = struct.pack("<Q", len(hdr)) + hdr
    try:
        _, infos, _ = ost._parse("f", head, 8 + len(hdr) + data_len)
    except Exception as e:  # noqa: BLE001 - every error counts: the indexer must not accept it
        return e
    ts = list(infos.values())
    return [t.name for t in ts], [t.dtype for t in ts], [list(t.shape) for t in ts], [t.begin for t in ts], [
        t.end for t in ts
    ]


def same_as_python(hdr: bytes, data_len: int):
    """Check the rule on one header; return whether the indexer indexed it."""
    tab = index(hdr, data_len)
    ref = parse(hdr, data_len)
    if tab is None:
        return False
    assert not isinstance(ref, Exception), (hdr[:200], ref)
    got = (tab.names, tab.dtypes, tab.shapes, tab.begins, tab.ends)
    assert got == ref, hdr[:200]
    if ref[0]:
        assert tab.b_np.tolist() == ref[3] and tab.e_np.tolist() == ref[4]
        numel = [int(np.prod(s, dtype=object)) for s in ref[2]]
        assert all(len(s) == 1 for s in ref[2]) == (tab.numel1d is not None)
        if tab.numel1d is not None:
            assert tab.numel1d.tolist() == numel
    return True


NAMES = ["w", "", "layers.0.weight", "ñame", "日本", "a\"b", "back\\slash", "tab\tnl\n", "emoji\U0001F600", "/x/"]


def generate(rng: random.Random, count: int):
    """(header bytes, data_len) of a valid file: random names, dtypes,
    shapes, gaps, metadata; json.dumps with and without ensure_ascii."""
    h, off = {}, 0
    dts = list(ost.DTYPES)
    for i in range(count):
        dt = rng.choice(dts)
        bits = ost.DTYPES[dt][0]
        shape = [rng.randrange(0, 5) for _ in range(rng.randrange(0, 4))]
        if bits == 4 and shape:
            shape[-1] = 2 * shape[-1]
        elif bits == 4:
            shape = [2]
        nb = int(np.prod(shape, dtype=np.int64)) * bits // 8
        off += rng.choice([0, 0, 0, 1, 8])
        name = rng.choice(NAMES) + str(i)
        h[name] = {"dtype": dt, "shape": shape, "data_offsets": [off, off + nb]}
        off += nb
    items = list(h.items())
    if rng.random() < 0.5:
        items.insert(rng.randrange(len(items) + 1), ("__metadata__", {"format": "pt", "k": "v" * rng.randrange(3)}))
    hdr = json.dumps(dict(items), ensure_ascii=rng.random() < 0.5, indent=rng.choice([None, 1])).encode()
    return hdr, off + rng.choice([0, 0, 3])


def test_valid_headers_indexed_and_equal():
    rng = random.Random(1)
    for k in range(300):
        hdr, n = generate(rng, rng.randrange(0, 12))
        assert same_as_python(hdr, n), hdr[:300]


OK = '"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}'


@pytest.mark.parametrize(
    "hdr, data_len, indexed",
    [
        ("{%s}" % OK, 8, True),
        ('{"__metadata__": null, %s}' % OK, 8, True),
        ('{"__metadata__": {"x": [1, -2.5e3, true, null, {"y": "\\u00e9"}]}, %s}' % OK, 8, True),
        ("{%s}  \n\t" % OK, 8, True),
        ("{%s}" % OK.replace('"a"', '"\\u0061\\ud83d\\ude00"'), 8, True),
        # the indexer leaves these to the Python parser (some valid, some not)
        ('{"__metadata__": {"x": NaN}, %s}' % OK, 8, False),
        ('{"__metadata__": "s", %s}' % OK, 8, False),
        ('{"__metadata__": {}, "__metadata__": {}, %s}' % OK, 8, False),
        ("{%s, %s}" % (OK, OK), 8, False),  # a duplicate name
        ("{%s, %s}" % (OK, OK.replace("[0, 8]", "[8, 16]")), 16, False),  # the same, in file order
        ("{%s, %s}" % (OK, OK.replace('"a"', '"\\u0061"').replace("[0, 8]", "[8, 16]")), 16, False),  # escaped
        ("{%s, %s}" % (OK, OK.replace('"a"', '"b"').replace("[0, 8]", "[8, 16]")), 16, True),
        ("{%s}" % OK.replace("[0, 8]", "[0, 8.0]"), 8, False),
        ("{%s}" % OK.replace("[0, 8]", "[-0, 8]"), 8, False),
        ("{%s}" % OK.replace("[0, 8]", "[0, 8e0]"), 8, False),
        ("{%s}" % OK.replace("[0, 8]", "[00, 8]"), 8, False),
        ("{%s}" % OK.replace("[2]", "[2, -1]"), 8, False),
        ("{%s}" % OK.replace("[2]", "[true]"), 8, False),
        ("{%s}" % OK.replace("[2]", "[1000000000000000000000]"), 8, False),
        ("{%s}" % OK.replace('"F32"', '"Q8"'), 8, False),
        ("{%s}" % OK.replace('"F32"', '"F32", "extra": 1'), 8, False),
        ("{%s}" % OK.replace('"F32"', '"F32", "dtype": "F32"'), 8, False),
        ("{%s}" % OK.replace("[0, 8]", "[0, 8, 9]"), 8, False),
        ("{%s}" % OK.replace("[0, 8]", "[8, 0]"), 8, False),
        ("{%s}" % OK, 7, False),  # past the data region
        ("{%s}" % OK.replace("[2]", "[3]"), 8, False),
        ('{"b": {"dtype": "F32", "shape": [2], "data_offsets": [8, 16]}, %s}' % OK, 16, False),  # out of order
        ('{"b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}, %s}' % OK, 16, False),  # overlap
        ("{%s}" % OK.replace('"a"', '"\\u0000"'), 8, False),
        ("{%s}" % OK.replace('"a"', '"\\ud800"'), 8, False),  # a lone surrogate
        ("{%s}" % OK.replace('"a"', '"\\udc00x"'), 8, False),
        ("{%s}" % OK.replace('"a"', '"a\tb"'), 8, False),  # a raw control character
        ("{%s}" % OK.replace('"a"', '"\\x"'), 8, False),
        ("{%s} x" % OK, 8, False),
        ("{%s,}" % OK, 8, False),
        ("\ufeff{%s}" % OK, 8, False),
        ("[1, 2]", 0, False),
        ('{"a": [1]}', 0, False),
        ("{%s" % OK, 8, False),
        ("", 0, False),
    ],
)
def test_cases(hdr, data_len, indexed):
    assert same_as_python(hdr.encode("utf-8"), data_len) == indexed


def test_invalid_utf8_names_not_indexed():
    for raw in (b"\xff", b"\xc0\xaf", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xe2\x82", b"\x80"):
        hdr = ("{%s}" % OK).encode().replace(b'"a"', b'"' + raw + b'"')
        assert not same_as_python(hdr, 8), raw
    assert same_as_python(("{%s}" % OK).encode().replace(b'"a"', "\"é€\U0001F600\"".encode()), 8)


def mutations(rng: random.Random, hdr: bytes):
    """Corruptions: a byte changed, removed, repeated or swapped for a JSON
    token; a cut; a slice moved."""
    toks = [b'"', b",", b":", b"{", b"}", b"[", b"]", b"-", b"0", b"9", b".5", b"e3", b"\\", b"\\u0000", b" ",
            b"null", b'"F32"', b'"__metadata__"', b"\x00", b"\xff", b"99999999999999999999"]  # fmt: skip
    for _ in range(40):
        i = rng.randrange(len(hdr) + 1)
        kind = rng.randrange(6)
        if kind == 0 and i < len(hdr):
            yield hdr[:i] + bytes([rng.randrange(256)]) + hdr[i + 1 :]
        elif kind == 1:
            yield hdr[:i] + hdr[i + 1 :]
        elif kind == 2:
            yield hdr[:i] + rng.choice(toks) + hdr[i:]
        elif kind == 3:
            yield hdr[:i]
        elif kind == 4 and i < len(hdr):
            d = rng.choice(b"0123456789")
            j = hdr.find(b"data_offsets", i)
            if j >= 0:  # a digit inside an offset or a shape changed
                k = j + 15 + rng.randrange(8)
                if k < len(hdr) and hdr[k : k + 1].isdigit():
                    yield hdr[:k] + bytes([d]) + hdr[k + 1 :]
        else:
            j = rng.randrange(len(hdr) + 1)
            a, b = sorted((i, j))
            yield hdr[:a] + hdr[b:] + hdr[a:b]


def test_corrupted_headers_never_indexed_differently():
    rng = random.Random(2)
    indexed = total = 0
    for _ in range(60):
        hdr, n = generate(rng, rng.randrange(1, 6))
        for bad in mutations(rng, hdr):
            total += 1
            indexed += same_as_python(bad, n)
    assert total > 1000 and indexed > 0  # (some mutations leave a valid header)


def _file(path, hdr: bytes, data_len: int):
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hdr)) + hdr + bytes(range(256)) * (data_len // 256) + bytes(data_len % 256))


def _load_both(path, monkeypatch, framework="numpy"):
    """load_file with the indexer and without: (result or error) each."""
    out = []
    for on in (True, False):
        monkeypatch.setattr(_stindex, "ENABLED", on)
        try:
            got = ost.load_file(path, framework=framework)
            out.append({k: (str(v.dtype), tuple(v.shape), np.asarray(v).tobytes()) for k, v in got.items()})
        except Exception as e:  # noqa: BLE001 - compared below
            out.append((type(e), str(e)))
        out.append(_stfast.last_phases.get("parser"))
    return out


def test_load_file_same_with_and_without(tmp_path, monkeypatch):
    rng = random.Random(3)
    p = str(tmp_path / "f.safetensors")
    used = 0
    for k in range(40):
        hdr, n = generate(rng, rng.randrange(0, 8))
        cases = [hdr] + list(mutations(rng, hdr))[:5]
        for h in cases:
            _file(p, h, n)
            a, pa, b, pb = _load_both(p, monkeypatch)
            assert a == b, h[:200]
            used += pa == "c"
            assert pb != "c"
    assert used >= 40


def test_many_tensors_take_the_indexer(tmp_path):
    """The bench's file shape (python/bench_many_tensors.py): the C route."""
    h, off = {}, 0
    for i in range(2000):
        dt, isz = [("F16", 2), ("BF16", 2), ("F32", 4), ("U8", 1)][i % 4]
        h["layers.%d.w" % i] = {"dtype": dt, "shape": [64 // isz], "data_offsets": [off, off + 64]}
        off += 64
    p = str(tmp_path / "many.safetensors")
    _file(p, json.dumps(h).encode(), off)
    got = ost.load_file(p, framework="numpy")
    assert _stfast.last_phases["parser"] == "c" and len(got) == 2000
    raw = open(p, "rb").read()[8 + len(json.dumps(h).encode()) :]
    for k, e in h.items():
        assert got[k].tobytes() == raw[e["data_offsets"][0] : e["data_offsets"][1]]


def test_against_the_safetensors_package(tmp_path):
    """Files the safetensors package writes are indexed, equal to it; a
    corrupted header the package reads is read the same; one the indexer
    indexes and the package refuses has a gap (opends accepts gaps)."""
    stn = pytest.importorskip("safetensors.numpy")
    safetensors = pytest.importorskip("safetensors")
    rng = random.Random(4)
    p = str(tmp_path / "r.safetensors")
    kinds = [("F32", np.float32), ("F16", np.float16), ("I64", np.int64), ("U8", np.uint8), ("BOOL", np.bool_)]
    for k in range(15):
        ts = {}
        for i in range(rng.randrange(1, 6)):
            _, t = rng.choice(kinds)
            shape = tuple(rng.randrange(0, 4) for _ in range(rng.randrange(0, 3)))
            ts["t%d%s" % (i, rng.choice(NAMES))] = np.ones(shape, dtype=t)
        stn.save_file(ts, p, metadata={"m": "x"})
        raw = open(p, "rb").read()
        (n,) = struct.unpack("<Q", raw[:8])
        hdr, data_len = raw[8 : 8 + n], len(raw) - 8 - n
        assert same_as_python(hdr, data_len)
        for bad in mutations(rng, hdr):
            with open(p, "wb") as f:
                f.write(struct.pack("<Q", len(bad)) + bad + raw[8 + n :])
            try:
                with safetensors.safe_open(p, "np") as f:
                    ref = {k: f.get_tensor(k) for k in f.keys()}
            except Exception:  # noqa: BLE001 - refused by the package
                ref = None
            tab = index(bad, data_len)
            if ref is not None:
                got = ost.load_file(p, framework="numpy")
                assert sorted(got) == sorted(ref)
                for name in ref:
                    assert got[name].dtype == ref[name].dtype and got[name].tobytes() == ref[name].tobytes()
            if tab is not None:
                assert same_as_python(bad, data_len)
                if ref is None:
                    spans = sorted(zip(tab.begins, tab.ends))
                    covered = [(a, b) for a, b in spans if b > a]
                    contiguous = covered and covered[0][0] == 0 and covered[-1][1] == data_len and all(
                        x[1] == y[0] for x, y in zip(covered, covered[1:]))
                    assert not contiguous, bad[:200]


def test_torch_views_same_in_threads_and_without_the_indexer(tmp_path, monkeypatch):
    """Four dtypes interleaved (the bench's file) and a few odd tensors: the
    same tensors with the views made in threads, with the C indexer off."""
    torch = pytest.importorskip("torch")
    h, off = {}, 0
    for i in range(4100):
        dt, isz = [("F16", 2), ("BF16", 2), ("F32", 4), ("U8", 1)][i % 4]
        shape = [8 // isz] if i % 7 else [2, 4 // isz]
        h["t%d" % i] = {"dtype": dt, "shape": shape, "data_offsets": [off, off + 8]}
        off += 8 + (1 if i == 4000 else 0)  # one misaligned tensor after it
    p = str(tmp_path / "m.safetensors")
    _file(p, json.dumps(h).encode(), off)
    runs = []
    for threads, on in ((0, True), (4, True), (0, False)):
        monkeypatch.setattr(_stfast, "VIEW_THREADS", threads)
        monkeypatch.setattr(_stindex, "ENABLED", on)
        got = ost.load_file(p, framework="torch")
        assert (_stfast.last_phases["parser"] == "c") == on
        assert list(got) == list(h)
        runs.append({k: (v.dtype, tuple(v.shape), v.contiguous().view(-1).view(torch.uint8).numpy().tobytes())
                     for k, v in got.items()})  # fmt: skip
    assert runs[0] == runs[1] == runs[2]
    raw = open(p, "rb").read()[8 + len(json.dumps(h).encode()) :]
    for k, e in h.items():
        assert runs[0][k][2] == raw[e["data_offsets"][0] : e["data_offsets"][1]], k


def test_errors_in_the_library_convention():
    """Bad arguments: -OPENDS_INVALID_VALUE (a negated OPENDS_* code, as the
    ssize_t calls), *out NULL, the detail naming the parameter; the
    header is never read."""
    import ctypes

    import opends
    from opends import _lib

    f, _free = _stindex._functions()
    hdr = b'{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}'
    names, names_z, bits = _stindex._dtype_table(ost._BITS)
    for args, param in (
        ((None, len(hdr), 1, names_z, bits), "hdr"),
        ((hdr, len(hdr), 1, None, bits), "dtypes"),
        ((hdr, len(hdr), 1, names_z, None), "bits"),
        ((hdr, len(hdr), 1, names_z, bits[:1] + b"\0" + bits[2:]), "bits[1]"),
    ):
        ix = ctypes.cast(ctypes.c_void_p(1), ctypes.POINTER(_stindex._Index))
        at = ctypes.cast(ctypes.c_char_p(args[0]), ctypes.c_void_p).value if args[0] else None
        rc = f(at, *args[1:], ctypes.byref(ix))
        assert rc == -opends.OPENDS_INVALID_VALUE, (param, rc)
        assert not ix, param
        assert param in _lib.last_detail(), (param, _lib.last_detail())
    assert -opends.OPENDS_INVALID_VALUE == -5022
    at = ctypes.cast(ctypes.c_char_p(hdr), ctypes.c_void_p).value
    assert f(at, len(hdr), 1, names_z, bits, None) == -opends.OPENDS_INVALID_VALUE
    assert "out" in _lib.last_detail()


def test_dtype_table_follows_the_contents():
    """The dtype list handed to C is made from the dict's contents: a dict
    changed in place (or another one at a freed one's id) gets its own."""
    d = {"F16": 16, "U8": 8}
    assert _stindex._dtype_table(d) == (["F16", "U8"], b"F16\0U8\0\0", bytes([16, 8]))
    d["F16"] = 32
    assert _stindex._dtype_table(d) == (["F16", "U8"], b"F16\0U8\0\0", bytes([32, 8]))
    d["I8"] = 8
    assert _stindex._dtype_table(d)[1] == b"F16\0U8\0I8\0\0"
