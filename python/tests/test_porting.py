"""The rows of python/PORTING.md that no other test covers: each test
names the peer's call it stands for. (Rows covered elsewhere name their
test in the table.)"""
import ctypes
import glob
import os
import re

import numpy as np
import pytest

import opends

pytestmark = pytest.mark.usefixtures("driver")


@pytest.fixture
def datafile(make_datafile):
    return make_datafile(1 << 20)


# -- KvikIO ---------------------------------------------------------------------


def test_kvikio_open_modes(tmp_path):
    """kvikio.CuFile(path, "w"/"r"/"r+") -> opends.File(path, mode)."""
    p = str(tmp_path / "m.bin")
    with opends.File(p, "w") as f:
        assert f.write(b"hello world") == 11
    with opends.File(p, "r+") as f:
        assert f.write(b"J", 1, 0) == 1
    with opends.File(p, "r") as f:
        b = bytearray(11)
        assert f.read(b) == 11 and bytes(b) == b"Jello world"


def test_kvikio_size_fileno_close(datafile):
    """CuFile.nbytes(), .fileno(), .close(), .closed, `with` -> File.size() and the same."""
    path, data = datafile
    with opends.File(path) as f:
        assert f.size() == data.nbytes and f.fileno() >= 0 and not f.closed
    assert f.closed


def test_kvikio_raw_read_async_as_stream(datafile):
    """CuFile.raw_read_async(buf, stream, size, file_offset, dev_offset) ->
    Stream(stream).stream_read(f, buf, size, file_offset, buf_offset); and
    cuda.bindings.cufile.read_async(...) the same way."""
    path, data = datafile
    buf = np.zeros(5000, np.uint8)
    with opends.File(path) as f, opends.Stream.default() as s:
        op = s.stream_read(f, buf, 4000, 123, 1000)
        assert op.wait() == 4000
    assert np.array_equal(buf[1000:], data[123:4123]) and not buf[:1000].any()


def test_register(datafile):
    """kvikio.memory_register / cufile.buf_register -> opends.buf_register."""
    path, data = datafile
    buf = np.zeros(4096, np.uint8)
    assert opends.buf_register(buf) is buf
    try:
        with opends.File(path) as f:
            assert f.read(buf) == 4096
    finally:
        opends.buf_deregister(buf)
    assert np.array_equal(buf, data[:4096])


def test_compat_mode_as_backend(driver, datafile):
    """KVIKIO_COMPAT_MODE=ON (POSIX I/O) -> opends.config(backend="ref")."""
    with opends.config(backend="ref"):
        assert opends.backend() == "ref"
        assert "backend ref" in opends.describe() and "pread" in opends.describe(datafile[0])
    assert opends.backend() == driver[0]


# -- cuda.bindings.cufile (NVIDIA's Python bindings) ------------------------------


def test_cufile_driver(driver):
    """cufile.driver_open/driver_close/driver_get_properties -> automatic,
    opends.driver_open/driver_close, opends.properties() (sizes in bytes)."""
    opends.driver_close()
    assert not opends.is_open()
    opends.driver_open()
    p = opends.properties()
    assert opends.is_open() and p["max_direct_io_size"] >= 4096 and p["max_batch_io_size"] >= 1


def test_cufile_handle_register_fd(datafile):
    """cufile.handle_register(Descr with an fd) -> opends.File(fd); the fd stays the caller's."""
    fd = os.open(datafile[0], os.O_RDONLY)
    try:
        with opends.File(fd) as f:
            assert f.read(bytearray(10)) == 10
        os.fstat(fd)  # still open
    finally:
        os.close(fd)


def test_cufile_read_raw_pointer(datafile, tmp_path):
    """cufile.read(fh, ptr, size, file_offset, dev_offset) with a raw address ->
    f.raw_read(opends.BufferRef(ptr, nbytes, device, False, None), ...)."""
    path, data = datafile
    mem = (ctypes.c_uint8 * 8192)()
    ref = opends.BufferRef(ctypes.addressof(mem), 8192, False, False, None)
    with opends.File(path) as f:
        assert f.raw_read(ref, 4096, 100, 4096) == 4096
    assert bytes(mem[4096:]) == data[100:4196].tobytes()
    p = str(tmp_path / "w.bin")
    with opends.File(p, "w") as f:
        assert f.raw_write(ref, 4096, 0, 4096) == 4096  # cufile.write
    assert open(p, "rb").read() == data[100:4196].tobytes()


def test_cufile_batch(datafile):
    """cufile.batch_io_set_up/submit/get_status/destroy -> Batch(n).submit/get_status/close."""
    path, data = datafile
    bufs = [bytearray(1000) for _ in range(4)]
    with opends.File(path) as f, opends.Batch(4) as b:
        b.submit([opends.BatchOp("read", f, bufs[i], 1000, i * 5000, cookie=i) for i in range(4)])
        events = b.wait()
    assert sorted(e.cookie for e in events) == [0, 1, 2, 3] and all(e.ok and e.ret == 1000 for e in events)
    for i in range(4):
        assert bytes(bufs[i]) == data[i * 5000 : i * 5000 + 1000].tobytes()


def _nvidia_cufile_h():
    for c in [os.environ.get("OPENDS_CUFILE_H", "")] + glob.glob(
        os.path.join(os.environ.get("TMPDIR", "/tmp"), "opends-ci-cufile/nvidia/*/include/cufile.h")
    ) + ["/usr/local/cuda/include/cufile.h"]:
        if c and os.path.exists(c):
            return c
    return None


def test_cufile_error_codes():
    """cuFileError's CU_FILE_* status -> opends.Error.code: the same numbers
    (checked against NVIDIA's cufile.h where one is at hand)."""
    h = _nvidia_cufile_h()
    if h is None:
        pytest.skip("no NVIDIA cufile.h here (CI takes one from PyPI's nvidia-cufile)")
    text = open(h).read()
    base = int(re.search(r"#define CUFILEOP_BASE_ERR (\d+)", text).group(1))
    theirs = {}
    for off, name in re.findall(r"CUFILE_OP\(\s*(?:CUFILEOP_BASE_ERR\s*\+\s*)?(\d+),\s*CU_FILE_(\w+),", text):
        theirs[name] = int(off) + (base if name != "SUCCESS" else 0)
    ours = {n[len("OPENDS_") :]: c for c, n in opends._CODES.items()}
    shared = set(ours) & set(theirs)
    assert {"SUCCESS", "INVALID_VALUE", "DRIVER_NOT_INITIALIZED", "IO_NOT_SUPPORTED"} <= shared
    for n in shared:
        assert ours[n] == theirs[n], n


def test_versions():
    """cufile.get_version() -> opends.library_version() (OpenDS's version, not cuFile's)."""
    assert opends.library_version() == tuple(int(x) for x in opends.__version__.split("."))


def test_porting_md_rows_name_real_tests():
    """Every `module::test` PORTING.md names exists, and every table row
    names a test or says "none"."""
    here = os.path.dirname(__file__)
    md = os.path.join(here, "..", "PORTING.md")
    if not os.path.exists(md):
        pytest.skip("PORTING.md is not beside the tests")
    text = open(md).read()
    rows = [r for r in text.splitlines() if r.startswith("| ") and not r.startswith("| ---") and "tested by" not in r]
    assert len(rows) >= 30
    for r in rows:
        cells = [c.strip() for c in r.strip("|").split("|")]
        assert re.search(r"test_\w+::test_\w+", cells[-1]) or (cells[-1] == "—" and "none" in cells[1]), r
    for mod, fn in re.findall(r"(test_\w+)::(test_\w+)", text):
        src = open(os.path.join(here, mod + ".py")).read()
        assert re.search(r"^def %s\(" % fn, src, re.M), (mod, fn)
    for bare in re.findall(r"`, `(test_\w+)`", text):  # "mod::a`, `b" rows name b in the same module
        assert any(re.search(r"^def %s\(" % bare, open(p).read(), re.M) for p in glob.glob(os.path.join(here, "test_*.py")))
