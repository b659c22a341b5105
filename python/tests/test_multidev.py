"""Several devices on the CPU: File.read_fanout and load_file(device=[...])
under the hostdev accelerator with OPENDS_HOSTDEV_DEVICES=2, whose device d
owns the addresses [HOSTDEV_BASE + d * HOSTDEV_SPAN, + HOSTDEV_SPAN)
(src/accel/host/host.c). Buffers are mapped there, so the library sees two
devices and copies between them as it would between two GPUs. Every
result is compared byte for byte with the file.
"""
import ctypes
import json
import os
import struct

import pytest

import opends
from opends import safetensors as ost

np = pytest.importorskip("numpy")

HOSTDEV_BASE = 0x7E8000000000
HOSTDEV_SPAN = 1 << 36
MAP_FIXED_NOREPLACE = 0x100000
_libc = ctypes.CDLL(None, use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
_libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]


class DeviceMemory:
    """n bytes mapped at the start of simulated device d's range."""

    def __init__(self, d, n, slot=0):
        self.n = max(n, 1)
        want = HOSTDEV_BASE + d * HOSTDEV_SPAN + slot * (1 << 32)
        prot, flags = 3, 0x02 | 0x20 | MAP_FIXED_NOREPLACE  # RW, PRIVATE | ANONYMOUS
        p = _libc.mmap(want, self.n, prot, flags, -1, 0)
        if p in (None, ctypes.c_void_p(-1).value) or p != want:
            pytest.skip("cannot map memory at device %d's address 0x%x (errno %d)" % (d, want, ctypes.get_errno()))
        self.addr = p
        self.array = np.ctypeslib.as_array((ctypes.c_uint8 * self.n).from_address(p))[:n]

    def free(self):
        _libc.munmap(self.addr, self.n)


@pytest.fixture(scope="module")
def two_devices():
    saved = {k: os.environ.get(k) for k in ("OPENDS_BACKEND", "OPENDS_ACCEL", "OPENDS_HOSTDEV_DEVICES")}
    opends.driver_close()
    os.environ.update(OPENDS_ACCEL="hostdev", OPENDS_HOSTDEV_DEVICES="2")
    os.environ.setdefault("OPENDS_BACKEND", "auto")
    try:
        opends.driver_open()
        n = ctypes.c_uint()
        opends._lib.check(opends._lib.lib.opends_device_count(ctypes.byref(n)))
        assert n.value == 2
        yield
    finally:
        opends.driver_close()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@pytest.fixture
def mem():
    made = []

    def make(d, n, slot=0):
        m = DeviceMemory(d, n, slot)
        made.append(m)
        return m.array

    yield make
    for m in made:
        m.free()


def test_read_fanout_places_the_same_bytes_on_both(two_devices, mem, tmp_path, pattern):
    n = (3 << 20) + 12345
    data = pattern(n, seed=7)
    p = tmp_path / "f.bin"
    p.write_bytes(data.tobytes())
    a, b = mem(0, n + 100), mem(1, n + 100)
    a[:] = 0xAA
    b[:] = 0xBB
    with opends.File(str(p)) as f:
        assert f.read_fanout([a, b], n - 1000, 1000, buf_offsets=[10, 99]) == n - 1000
        assert a[10 : 10 + n - 1000].tobytes() == data[1000:].tobytes()
        assert b[99 : 99 + n - 1000].tobytes() == data[1000:].tobytes()
        assert (a[:10] == 0xAA).all() and (a[10 + n - 1000 :] == 0xAA).all()
        assert (b[:99] == 0xBB).all() and (b[99 + n - 1000 :] == 0xBB).all()
        # size defaults to the smallest room; short at EOF
        c, d = mem(0, n + 50, slot=1), mem(1, n + 7, slot=1)
        assert f.read_fanout([c, d]) == n
        assert c[:n].tobytes() == data.tobytes() and d[:n].tobytes() == data.tobytes()
        # a host buffer among the targets
        h = np.zeros(n, np.uint8)
        assert f.read_fanout([a, h], n) == n and h.tobytes() == data.tobytes()


def test_read_fanout_refuses_bad_arguments(two_devices, mem, tmp_path):
    p = tmp_path / "f.bin"
    p.write_bytes(b"x" * 4096)
    a = mem(0, 4096)
    with opends.File(str(p)) as f:
        with pytest.raises(ValueError, match="1 to 64"):
            f.read_fanout([])
        with pytest.raises(ValueError, match="1 to 64"):
            f.read_fanout([a] * 65)
        with pytest.raises(TypeError, match="list of buffers"):
            f.read_fanout(a.tobytes())
        with pytest.raises(ValueError, match="buf_offsets has 1 entries for 2"):
            f.read_fanout([a, a], buf_offsets=[0])
        with pytest.raises(opends.Error) as ei:  # too big for the buffer: checked before the library
            f.read_fanout([a], 5000)
        assert ei.value.code == opends.OPENDS_INVALID_VALUE
        with pytest.raises(opends.Error) as ei:  # overlapping targets: the library refuses, reads nothing
            f.read_fanout([a[:2048], a[512:2560]], 1024)
        assert ei.value.code == opends.OPENDS_INVALID_VALUE


_ST_NAMES = {"<f2": "F16", "<f4": "F32", "|i1": "I8", "|u1": "U8", "<i8": "I64"}


def _write_st(path, tensors):
    """The safetensors layout (8-byte length, JSON header, data), written
    here so that the test runs without the safetensors package."""
    header, blobs, off = {}, [], 0
    for k, v in tensors.items():
        if off % 8:  # aligned like safetensors' writer (misaligned ones are copies)
            blobs.append(b"\0" * (8 - off % 8))
            off += 8 - off % 8
        raw = v.tobytes()
        header[k] = {"dtype": _ST_NAMES[v.dtype.str], "shape": list(v.shape), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    hb = json.dumps(header).encode()
    hb += b" " * (-len(hb) % 8)
    path.write_bytes(struct.pack("<Q", len(hb)) + hb + b"".join(blobs))


def test_load_file_on_two_devices(two_devices, mem, tmp_path, monkeypatch):
    rng = np.random.default_rng(3)
    tensors = {}
    for i in range(300):
        dt = [np.float16, np.float32, np.int8, np.uint8, np.int64][i % 5]
        shape = [(17,), (3, 5), (), (0, 4), (2, 3, 4)][i % 5]
        tensors["t%03d" % i] = rng.integers(0, 100, shape).astype(dt)
    p = tmp_path / "m.safetensors"
    _write_st(p, tensors)
    slots = {}

    def alloc(framework, device, n):
        d = {"hostdev:0": 0, "hostdev:1": 1}[device]
        slots[device] = slots.get(device, -1) + 1
        return mem(d, n, slot=slots[device])

    monkeypatch.setattr(ost, "_alloc", alloc)
    outs = ost.load_file(str(p), device=["hostdev:0", "hostdev:1"], framework="numpy")
    assert isinstance(outs, list) and len(outs) == 2
    for d, out in enumerate(outs):
        assert sorted(out) == sorted(tensors)
        for k, v in tensors.items():
            got = out[k]
            assert got.dtype == v.dtype and got.shape == v.shape, k
            assert got.tobytes() == v.tobytes(), k
            if got.size:  # a view of device d's buffer
                addr = got.__array_interface__["data"][0]
                assert HOSTDEV_BASE + d * HOSTDEV_SPAN <= addr < HOSTDEV_BASE + (d + 1) * HOSTDEV_SPAN, k
    # a subset, and copies
    outs = ost.load_file(str(p), device=["hostdev:1", "hostdev:0"], framework="numpy", keys=["t001", "t003"], copy=True)
    assert [sorted(o) for o in outs] == [["t001", "t003"]] * 2
    assert all(o["t001"].tobytes() == tensors["t001"].tobytes() for o in outs)
    with pytest.raises(KeyError, match="nope"):
        ost.load_file(str(p), device=["hostdev:0"], framework="numpy", keys=["nope"])
    with pytest.raises(ValueError, match="1 to 64"):
        ost.load_file(str(p), device=[], framework="numpy")


def test_device_index_from_cuda_array_interface():
    """An object with __cuda_array_interface__ and CuPy's device.id says
    which device it is on; one without says nothing (the library finds the
    device from the pointer either way)."""

    class Dev:
        def __init__(self, i):
            self.id = i

    class CAI:
        def __init__(self, dev):
            self.__cuda_array_interface__ = {"shape": (4,), "typestr": "<f4", "data": (0x1000, False), "version": 3}
            if dev is not None:
                self.device = Dev(dev)

    assert opends.get_buffer(CAI(1), True).device_index == 1
    r = opends.get_buffer(CAI(None), True)
    assert r.device and r.device_index is None and r.ptr == 0x1000 and r.nbytes == 16
    assert opends.get_buffer(CAI("x"), True).device_index is None
