"""What a Python user of KvikIO, io and concurrent.futures expects: KvikIO's
argument order, append mode, messages naming the parameter, no signal
handlers, DLPack, standard futures, describe() and config()."""
import asyncio
import concurrent.futures as cf
import os
import subprocess
import sys
import time

import numpy as np
import pytest

import opends

pytestmark = pytest.mark.usefixtures("driver")


@pytest.fixture
def datafile(make_datafile):
    return make_datafile(4 << 20)


# -- KvikIO's positional order: (buf, size, file_offset, task_size) -------------


@pytest.mark.parametrize("call", ["pread", "read"])
def test_kvikio_positional_order(datafile, call):
    path, data = datafile
    buf = np.zeros(4 << 20, np.uint8)
    with opends.File(path) as f:
        r = getattr(f, call)(buf, 1 << 20, 4096, 1 << 18)  # task_size, not buf_offset
        n = r if call == "read" else r.get()
    assert n == 1 << 20
    assert np.array_equal(buf[: 1 << 20], data[4096 : 4096 + (1 << 20)])
    assert not buf[1 << 20 :].any()


def test_kvikio_pwrite_positional(tmp_path, pattern):
    data = pattern(3 << 20, seed=3)
    p = str(tmp_path / "w.bin")
    with opends.File(p, "w") as f:
        assert f.pwrite(data, data.nbytes, 0, 1 << 20).get() == data.nbytes
        assert f.write(data[:100], 100, data.nbytes) == 100
    assert open(p, "rb").read() == data.tobytes() + data[:100].tobytes()


def test_buf_offset_is_keyword_only(datafile):
    path, data = datafile
    buf = np.zeros(100, np.uint8)
    with opends.File(path) as f:
        with pytest.raises(TypeError):
            f.read_async(buf, 10, 0, 5)  # (buf, size, file_offset) only
        assert f.read(buf, 10, 7, buf_offset=5) == 10
    assert np.array_equal(buf[5:15], data[7:17])


def test_raw_read_write_dev_offset(tmp_path, pattern):
    data = pattern(10000)
    p = str(tmp_path / "raw.bin")
    with opends.File(p, "w+") as f:
        assert f.raw_write(data, 5000, 0, 100) == 5000  # dev_offset 100
        out = np.zeros(6000, np.uint8)
        assert f.raw_read(out, 5000, 0, 1000) == 5000
    assert np.array_equal(out[1000:], data[100:5100])


# -- mode "a" appends like open() ------------------------------------------------


def test_append_mode_appends(tmp_path):
    p = tmp_path / "app.txt"
    p.write_bytes(b"EXISTING-CONTENT\n")
    with opends.File(str(p), "a") as f:
        assert f.write(b"NEW") == 3
        futs = [f.write_async(b"%d;" % i) for i in range(10)]
        assert sum(x.result() for x in futs) == 20
    got = p.read_bytes()
    assert got.startswith(b"EXISTING-CONTENT\nNEW") and len(got) == 17 + 3 + 20
    assert sorted(got[20:].split(b";")[:-1]) == sorted(b"%d" % i for i in range(10))
    with open(p, "ab") as g:  # like io: the end is the file's, not a copy
        g.write(b"+")
    with opends.File(str(p), "a+") as f:
        f.write(b"Z")
        b = bytearray(8)
        assert f.read(b) == 8 and bytes(b) == b"EXISTING"
    assert p.read_bytes().endswith(b"+Z")


# -- messages naming the parameter -----------------------------------------------


@pytest.mark.parametrize(
    "kwargs, name",
    [
        ({"file_offset": 1.5}, "file_offset"),
        ({"file_offset": "10"}, "file_offset"),
        ({"size": 2.0}, "size"),
        ({"buf_offset": None}, "buf_offset"),
        ({"task_size": 1.5}, "task_size"),
    ],
)
def test_wrong_types_name_the_parameter(datafile, kwargs, name):
    path, _ = datafile
    with opends.File(path) as f:
        with pytest.raises(TypeError, match=r"read: %s must be an int, not" % name):
            f.read(bytearray(10), **kwargs)


def test_huge_offset_is_refused_not_wrapped(datafile):
    path, _ = datafile
    with opends.File(path) as f:
        with pytest.raises(opends.Error) as ei:
            f.read(bytearray(10), file_offset=2**63)
    assert ei.value.code == opends.OPENDS_INVALID_VALUE and "file_offset" in ei.value.detail
    assert "-9223372036854775808" not in str(ei.value)


def test_numpy_ints_are_ints(datafile):
    path, data = datafile
    b = bytearray(8)
    with opends.File(path) as f:
        assert f.read(b, np.int64(8), np.uint32(16)) == 8
    assert bytes(b) == data[16:24].tobytes()


def test_bad_constructor_arguments(tmp_path):
    with pytest.raises(TypeError, match="path_or_fd"):
        opends.File(3.5)
    with pytest.raises(TypeError, match="mode"):
        opends.File(str(tmp_path / "x"), 1)
    with pytest.raises(TypeError, match="max_nr"):
        opends.Batch("8")


def test_closed_file_like_io(datafile):
    f = opends.File(datafile[0])
    f.close()
    with pytest.raises(ValueError):
        f.fileno()
    with pytest.raises(ValueError):
        f.size()


# -- no signal handlers unless asked ---------------------------------------------


def test_no_signal_handlers_by_default(datafile):
    code = (
        "import signal, opends\n"
        "before = [signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)]\n"
        "with opends.File(%r) as f: f.read(bytearray(10))\n"
        "print(opends.backend(), before == [signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)])\n"
        % datafile[0]
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.split()[1] == "True", (r.stdout, r.stderr)


# -- DLPack ----------------------------------------------------------------------


class DLOnly:
    """Exposes only __dlpack__/__dlpack_device__ (like a JAX array)."""

    def __init__(self, a):
        self._a = a

    def __dlpack__(self, stream=None):
        return self._a.__dlpack__()

    def __dlpack_device__(self):
        return self._a.__dlpack_device__()


def test_dlpack_buffers(datafile, tmp_path):
    if not hasattr(np.empty(1), "__dlpack__"):
        pytest.skip("this NumPy has no __dlpack__")
    path, data = datafile
    out = np.zeros(1000, np.float32)  # 4000 bytes
    with opends.File(path) as f:
        assert f.read(DLOnly(out), file_offset=12) == 4000
    assert out.tobytes() == data[12:4012].tobytes()
    p = str(tmp_path / "dl.bin")
    with opends.File(p, "w") as f:
        assert f.write(DLOnly(out[10:20])) == 40  # a view with an offset
    assert open(p, "rb").read() == out[10:20].tobytes()
    with pytest.raises(ValueError, match="not C-contiguous"):
        opends.get_buffer(DLOnly(np.zeros((4, 4), np.float32)[:, ::2]), True)
    ref = opends.get_buffer(DLOnly(out), True)
    assert not ref.device and ref.device_index is None and ref.nbytes == 4000 and ref.ptr == out.ctypes.data


# -- futures: concurrent.futures and asyncio -------------------------------------


def test_futures_with_concurrent_futures(datafile):
    path, data = datafile
    bufs = [np.zeros(1 << 20, np.uint8) for _ in range(4)]
    with opends.File(path) as f:
        futs = [f.pread(b, file_offset=i << 20) for i, b in enumerate(bufs)]
        assert all(isinstance(x, cf.Future) for x in futs)
        done, not_done = cf.wait(futs, timeout=30)
        assert len(done) == 4 and not not_done
        assert sorted(x.result() for x in cf.as_completed(futs, timeout=30)) == [1 << 20] * 4
        seen = []
        fut = f.read_async(np.zeros(10, np.uint8), file_offset=3)
        fut.add_done_callback(lambda x: seen.append(x.result()))
        assert fut.result(timeout=30) == 10
        # the callback runs on the collecting thread, just after the result
        # is set (which already ends cf.wait): wait for it by time, sleeping
        deadline = time.monotonic() + 30
        while not seen and time.monotonic() < deadline:
            time.sleep(0.001)
        assert seen == [10]
        assert fut.exception() is None and not fut.cancel() and not fut.cancelled()
    for i, b in enumerate(bufs):
        assert np.array_equal(b, data[i << 20 : (i + 1) << 20])


def test_future_error_through_concurrent_futures(tmp_path):
    p = str(tmp_path / "ro.bin")
    open(p, "wb").write(b"x" * 100)
    fd = os.open(p, os.O_RDONLY)
    try:
        with opends.File(fd) as f:
            fut = f.write_async(b"abc")
            (d,), _ = cf.wait([fut], timeout=30)
            assert isinstance(d.exception(), opends.Error) and d.exception().name == "EBADF"
            with pytest.raises(opends.Error):
                fut.result()
    finally:
        os.close(fd)


def test_futures_with_asyncio(datafile):
    path, data = datafile

    async def main():
        bufs = [np.zeros(1 << 19, np.uint8) for _ in range(6)]
        with opends.File(path) as f:
            ns = await asyncio.gather(*(f.pread(b, file_offset=i << 19) for i, b in enumerate(bufs)))
            n1 = await asyncio.wait_for(asyncio.wrap_future(f.read_async(bufs[0], file_offset=7)), 30)
        return ns, n1, bufs

    ns, n1, bufs = asyncio.run(main())
    assert ns == [1 << 19] * 6 and n1 == 1 << 19
    assert np.array_equal(bufs[0], data[7 : 7 + (1 << 19)])
    assert np.array_equal(bufs[5], data[5 << 19 : 6 << 19])


# -- describe, config, reprs -----------------------------------------------------


def test_describe(driver, datafile):
    d = opends.describe(datafile[0])
    assert ("backend %s" % driver[0]) in opends.describe() and isinstance(d, str) and d
    with opends.File(datafile[0]) as f:
        assert f.describe() == d or f.describe().split(":", 1)[1] == d.split(":", 1)[1]
    with pytest.raises(FileNotFoundError):
        opends.describe("/nonexistent/x")


def test_config_sets_and_restores(driver):
    backend, accel = driver
    assert opends.config.get("backend") == backend
    with opends.config(backend="ref", io_threads=2) as c:
        assert opends.backend() == "ref" and opends.config.get("io_threads") == "2"
        assert "io_threads='2'" in repr(c)
    assert opends.config.get("io_threads") is None and opends.backend() == backend


def test_config_invalid_changes_nothing(driver):
    before = opends.config.get()
    with pytest.raises(opends.Error) as ei:
        opends.config(io_threads=0)
    # an explicit setting (opends_driver_open_with): INVALID_VALUE, not the
    # environment's DRIVER_INVALID_PROPS
    assert ei.value.code == opends.OPENDS_INVALID_VALUE and "OPENDS_IO_THREADS" in ei.value.detail
    assert opends.config.get() == before
    with pytest.raises(TypeError, match="unknown setting 'threads'"):
        opends.config(threads=4)
    with pytest.raises(TypeError, match="io_threads must be"):
        opends.config(io_threads=1.5)
    assert opends.backend() == driver[0]


def test_config_leaves_the_environment_alone(driver, monkeypatch):
    """config opens with explicit settings (opends_driver_open_with): the
    process's environment stays as it was, explicit beats environment, and
    None falls back to the environment's value."""
    monkeypatch.setenv("OPENDS_QUEUE_DEPTH", "16")
    opends.driver_close()
    with opends.config(io_threads=3, queue_depth=8):
        assert "OPENDS_IO_THREADS" not in os.environ and os.environ["OPENDS_QUEUE_DEPTH"] == "16"
        assert opends.driver_setting("io_threads") == ("3", "explicit")
        assert opends.driver_setting("OPENDS_QUEUE_DEPTH") == ("8", "explicit")
        with opends.config(queue_depth=None):  # nested: io_threads stays, queue_depth from the environment
            assert opends.driver_setting("queue_depth") == ("16", "environment")
            assert opends.config.get("io_threads") == "3"
        assert opends.config.get("queue_depth") == "8"
    assert opends.driver_setting("queue_depth") == ("16", "environment")
    assert opends.driver_setting("io_threads") == (None, "default") and opends.config.get("io_threads") is None


def test_driver_open_with_settings(driver):
    """opends.driver_open(settings): opends_driver_open_with's exact
    errors, nothing opened on one, the settings before kept."""
    opends.driver_close()
    opends.driver_open({"OPENDS_IO_THREADS": 2, "inline_max": "0"})
    try:
        assert opends.driver_setting("io_threads") == ("2", "explicit")
        assert opends.driver_setting("OPENDS_INLINE_MAX") == ("0", "explicit")
        with pytest.raises(opends.Error) as ei:
            opends.driver_open({"io_threads": 4})
        assert ei.value.code == opends.OPENDS_DRIVER_ALREADY_OPEN
        opends.driver_open()  # (no settings: an open driver stays as it is)
        opends.driver_close()
        for bad, var in (({"io_threads": "zero"}, "OPENDS_IO_THREADS"), ({"cufile_library": "x.so"}, "OPENDS_CUFILE_LIBRARY")):
            with pytest.raises(opends.Error) as ei:
                opends.driver_open(bad)
            assert ei.value.code == opends.OPENDS_INVALID_VALUE and var in ei.value.detail, ei.value
            assert not opends.is_open()
        opends.driver_open()  # the settings before the failures
        assert opends.driver_setting("io_threads") == ("2", "explicit")
        with pytest.raises(TypeError, match="driver_open: unknown setting 'threads'"):
            opends.driver_open({"threads": 1})
        with pytest.raises(TypeError, match="driver_open: io_threads must be"):
            opends.driver_open({"io_threads": 1.5})
        with pytest.raises(TypeError, match="driver_open: settings must be a mapping"):
            opends.driver_open([("io_threads", 1)])
        with pytest.raises(TypeError, match="driver_setting: unknown setting 'nope'"):
            opends.driver_setting("nope")
    finally:
        opends.driver_close()
        opends.driver_open({})  # the environment alone again
    assert opends.driver_setting("io_threads")[1] != "explicit" and opends.backend() == driver[0]


def test_advise(driver, datafile):
    """File.advise: opends_handle_advise's values by name or number, kept
    when the driver is reopened (the file re-registers), a clear error for
    anything else; reads stay byte-exact."""
    path, data = datafile
    with opends.File(path) as f:
        for a in ("sequential", "random", "normal", opends.OPENDS_ADVICE_SEQUENTIAL):
            f.advise(a)
        buf = bytearray(4096)
        assert f.read(buf, 4096, 0) == 4096 and bytes(buf) == bytes(data[:4096])
        opends.driver_close()
        assert f.read(buf, 4096, 4096) == 4096 and bytes(buf) == bytes(data[4096:8192])  # re-registered, advised
        assert f._advice == opends.OPENDS_ADVICE_SEQUENTIAL
        for bad in ("often", 3, -1, True, None):
            with pytest.raises(ValueError, match="advise: advice must be one of"):
                f.advise(bad)
    with pytest.raises(ValueError, match="closed"):
        f.advise("random")


def test_reprs_and_module_names(datafile):
    with opends.Stream() as s:
        assert repr(s).startswith("<opends.Stream own")
        with opends.File(datafile[0]) as f:
            op = s.stream_read(f, bytearray(10))
            s.synchronize()
            assert "done 10" in repr(op)
    with opends.Batch(4) as b:
        assert repr(b) == "<opends.Batch max_nr=4 in_flight=0>"
    assert opends.Error.__module__ == "opends" and opends.File.__module__ == "opends"
    assert repr(opends.Error(5022, "x")) == "opends.Error(OPENDS_INVALID_VALUE, 'x')"
