"""CPU tests of the binding: sync, futures, streams, batches, registration
and errors, run once per available (backend, accel) pair."""
import array
import errno
import mmap
import os
import pickle
import signal
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import opends

pytestmark = pytest.mark.usefixtures("driver")


@pytest.fixture
def datafile(tmp_path, pattern):
    """A 1 MiB + 123 byte file of known content; returns (path, data)."""
    data = pattern((1 << 20) + 123)
    p = tmp_path / "data.bin"
    p.write_bytes(data.tobytes())
    return str(p), data


# -- round trips ---------------------------------------------------------------


@pytest.mark.parametrize("kind", ["numpy", "bytearray", "memoryview", "mmap", "array"])
def test_roundtrip_buffer_kinds(tmp_path, pattern, kind):
    n = 300_001  # not a multiple of anything useful
    data = pattern(n, seed=7)
    if kind == "numpy":
        src, dst = data.copy(), np.zeros(n, np.uint8)
    elif kind == "bytearray":
        src, dst = bytearray(data.tobytes()), bytearray(n)
    elif kind == "memoryview":
        src, dst = memoryview(bytearray(data.tobytes())), memoryview(bytearray(n))
    elif kind == "mmap":
        src = mmap.mmap(-1, n)
        src[:] = data.tobytes()
        dst = mmap.mmap(-1, n)
    else:
        src, dst = array.array("B", data.tobytes()), array.array("B", bytes(n))
    p = str(tmp_path / "rt.bin")
    with opends.File(p, "w") as f:
        assert f.write(src) == n
    assert os.path.getsize(p) == n
    with open(p, "rb") as fh:
        assert fh.read() == data.tobytes()
    with opends.File(p, "r") as f:
        assert f.read(dst) == n
    assert bytes(dst) == data.tobytes()


def test_typed_numpy_and_bytes_write(tmp_path):
    a = np.arange(1000, dtype=np.float64).reshape(10, 100)
    p = str(tmp_path / "f.bin")
    with opends.File(p, "w+") as f:
        assert f.write(a) == a.nbytes
        assert f.write(b"tail", file_offset=a.nbytes) == 4
        b = np.empty_like(a)
        assert f.read(b) == a.nbytes
        np.testing.assert_array_equal(a, b)
        t = bytearray(4)
        assert f.read(t, file_offset=a.nbytes) == 4 and t == b"tail"


def test_offsets_unaligned(datafile):
    path, data = datafile
    buf = bytearray(10_000)
    with opends.File(path) as f:
        for size, foff, boff in [(4097, 13, 5), (1, 4095, 0), (5000, 1 << 19, 4999), (0, 77, 10)]:
            buf[:] = b"\xee" * len(buf)
            assert f.read(buf, size, foff, buf_offset=boff) == size
            assert bytes(buf[boff : boff + size]) == data[foff : foff + size].tobytes()
            # nothing outside the target range was touched
            assert bytes(buf[:boff]) == b"\xee" * boff
            assert bytes(buf[boff + size :]) == b"\xee" * (len(buf) - boff - size)


def test_default_size_uses_rest_of_buffer(datafile):
    path, data = datafile
    buf = np.zeros(1000, np.uint8)
    with opends.File(path) as f:
        assert f.read(buf, buf_offset=600, file_offset=3) == 400
    assert buf[600:].tobytes() == data[3:403].tobytes()
    assert not buf[:600].any()


def test_eof_short_and_past(datafile):
    path, data = datafile
    n = len(data)
    buf = bytearray(1000)
    with opends.File(path) as f:
        assert f.size() == n
        assert f.read(buf, file_offset=n - 10) == 10
        assert bytes(buf[:10]) == data[-10:].tobytes()
        assert f.read(buf, file_offset=n) == 0
        assert f.read(buf, file_offset=n + 12345) == 0
        assert f.pread(buf, file_offset=n - 3).wait() == 3


def test_write_at_offsets_preserves_neighbours(tmp_path):
    p = str(tmp_path / "w.bin")
    with opends.File(p, "w+") as f:
        f.write(b"\x00" * 10000)
        f.write(b"ABC", file_offset=4095)
        f.write(bytearray(b"xyzw"), size=2, file_offset=9998, buf_offset=1)
    d = open(p, "rb").read()
    assert len(d) == 10000
    assert d[4095:4098] == b"ABC" and d[9998:] == b"yz"
    assert d[:4095] == b"\x00" * 4095 and d[4098:9998] == b"\x00" * (9998 - 4098)


def test_file_from_fd_not_closed(datafile):
    path, data = datafile
    fd = os.open(path, os.O_RDONLY)
    try:
        with opends.File(fd) as f:
            b = bytearray(16)
            assert f.read(b, file_offset=100) == 16 and b == data[100:116].tobytes()
        os.fstat(fd)  # still open
        with open(path, "rb") as fo, opends.File(fo) as f:  # fileno() objects
            assert f.fileno() == fo.fileno()
            assert f.read(b) == 16
    finally:
        os.close(fd)


def test_file_modes(tmp_path):
    p = str(tmp_path / "m.bin")
    with opends.File(p, "w") as f:
        f.write(b"0123456789")
    with opends.File(p, "a") as f:  # no truncation; writes go to the end, as with open()
        f.write(b"AB")
        assert f.pwrite(b"CDE").wait() == 3
        with pytest.raises(ValueError, match="file_offset"):
            f.write(b"!", file_offset=0)
    assert open(p, "rb").read() == b"0123456789ABCDE"
    with opends.File(p, "r+") as f:
        f.write(b"z", file_offset=0)
        b = bytearray(3)
        f.read(b)
        assert b == b"z12"
    with pytest.raises(FileExistsError):
        opends.File(p, "x")
    with pytest.raises(ValueError):
        opends.File(p, "rw")
    f = opends.File(p)
    f.close()
    f.close()
    assert f.closed
    with pytest.raises(ValueError):
        f.read(bytearray(1))


# -- futures -------------------------------------------------------------------


def test_many_futures_reverse_wait(datafile):
    path, data = datafile
    n = 64
    chunk = 4096 + 17
    bufs = [np.zeros(chunk, np.uint8) for _ in range(n)]
    with opends.File(path) as f:
        futs = [f.read_async(bufs[i], file_offset=i * chunk) for i in range(n)]
        for i in reversed(range(n)):
            assert futs[i].wait() == chunk
            assert futs[i].wait() == chunk  # twice: same value
            assert futs[i].done()
    for i in range(n):
        assert bufs[i].tobytes() == data[i * chunk : (i + 1) * chunk].tobytes()


def test_pread_split_pieces(datafile):
    path, data = datafile
    buf = np.zeros(len(data) + 50, np.uint8)
    with opends.File(path) as f:
        fut = f.pread(buf, file_offset=0, task_size=100_003)
        assert fut.result() == len(data)  # short at EOF, summed over pieces
        assert fut.get() == len(data)
    assert buf[: len(data)].tobytes() == data.tobytes()
    assert not buf[len(data) :].any()


def test_pwrite_then_pread(tmp_path, pattern):
    data = pattern(777_777, seed=3)
    p = str(tmp_path / "pw.bin")
    with opends.File(p, "w+") as f:
        assert f.pwrite(data, task_size=65536).wait() == len(data)
        w = f.write_async(data[:10], file_offset=len(data))
        assert w.wait(timeout=10) == 10
        out = np.zeros(len(data) + 10, np.uint8)
        assert f.pread(out, task_size=1 << 16).wait() == len(out)
    assert out.tobytes() == data.tobytes() + data[:10].tobytes()


def test_future_dropped_unawaited_is_safe(datafile):
    path, data = datafile
    with opends.File(path) as f:
        for i in range(16):
            f.read_async(bytearray(8192), file_offset=i * 8192)  # dropped at once
    # close waited for them; the next open/close cycle is clean
    opends.driver_close()
    opends.driver_open()


def test_future_asyncio(datafile):
    import asyncio

    path, data = datafile

    async def main():
        buf = bytearray(1000)
        with opends.File(path) as f:
            n = await f.read_async(buf, file_offset=5)
        return n, buf

    n, buf = asyncio.run(main())
    assert n == 1000 and bytes(buf) == data[5:1005].tobytes()


# -- stream --------------------------------------------------------------------


def test_stream_ordered(tmp_path, pattern):
    data = pattern(200_003, seed=5)
    p = str(tmp_path / "s.bin")
    out = np.zeros_like(data)
    with opends.File(p, "w+") as f, opends.Stream() as s:
        w = s.stream_write(f, data)
        r = s.stream_read(f, out)  # after the write, in stream order
        r2 = s.stream_read(f, bytearray(10), file_offset=len(data) + 5)  # past EOF
        s.synchronize()
        assert w.done() and r.done()
        assert w.result == len(data)
        assert r.wait() == len(data)
        assert r2.result == 0
    assert out.tobytes() == data.tobytes()


def test_default_stream(datafile):
    path, data = datafile
    buf = bytearray(333)
    with opends.File(path) as f:
        s = opends.Stream.default()
        assert s.handle == 0
        op = s.stream_read(f, buf, file_offset=1000)
        assert op.wait() == 333  # wait() synchronizes
    assert bytes(buf) == data[1000:1333].tobytes()


def test_stream_error_lands_in_result(datafile):
    path, _ = datafile
    with opends.File(path) as f, opends.Stream() as s:
        op = s.stream_write(f, b"nope")  # read-only file
        with pytest.raises(opends.Error) as ei:
            op.wait()
    assert ei.value.code == errno.EBADF


# -- batch ---------------------------------------------------------------------


def test_batch_reads_and_writes(tmp_path, datafile):
    path, data = datafile
    bufs = [bytearray(5000) for _ in range(8)]
    with opends.File(path) as f, opends.Batch(16) as b:
        ops = b.submit([opends.BatchOp("read", f, bufs[i], 5000 - i, i * 7001, i, cookie=i) for i in range(8)])
        assert len(ops) == 8 and b.in_flight == 8
        events = b.wait()
        assert b.in_flight == 0
    assert sorted(e.cookie for e in events) == list(range(8))
    for e in events:
        i = e.cookie
        assert e.ok and e.status == opends.OPENDS_COMPLETE and e.status_name == "COMPLETE"
        assert e.ret == 5000 - i and e.error is None
        assert bytes(bufs[i][i : i + 5000 - i]) == data[i * 7001 : i * 7001 + 5000 - i].tobytes()

    p = str(tmp_path / "bw.bin")
    with opends.File(p, "w+") as f, opends.Batch(4) as b:
        b.submit([("write", f, b"hello", None, 0), {"opcode": "write", "file": f, "buf": b"world", "file_offset": 5}])
        got = b.get_status(min_nr=2, timeout=10.0)
        assert sorted(e.ret for e in got) == [5, 5]
    assert open(p, "rb").read() == b"helloworld"


def test_batch_failure_and_full(datafile):
    path, _ = datafile
    with opends.File(path) as f, opends.Batch(2) as b:
        b.submit([opends.BatchOp("write", f, b"x", cookie="w")])
        (e,) = b.wait()
        assert e.status_name == "FAILED" and e.ret == -errno.EBADF
        assert e.error.code == errno.EBADF
        with pytest.raises(opends.Error) as ei:
            b.submit([("read", f, bytearray(1))] * 3)
        assert ei.value.code == opends.OPENDS_BATCH_FULL
        b.cancel()
        assert b.get_status(min_nr=0, timeout=0) == []
    with pytest.raises(ValueError):
        b.submit([("read", f, bytearray(1))])


# -- registration --------------------------------------------------------------


def test_registered_buffer(datafile):
    path, data = datafile
    buf = np.zeros(65536, np.uint8)
    with opends.File(path) as f:
        with opends.registered(buf) as rb:
            assert rb is buf
            with pytest.raises(opends.Error) as ei:
                opends.buf_register(buf)
            assert ei.value.code == opends.OPENDS_MEMORY_ALREADY_REGISTERED
            assert f.read(buf, file_offset=11) == 65536
        with opends.registered(buf[:1000]):
            # a target starting inside a registered range must end inside it
            with pytest.raises(opends.Error) as ei:
                f.read(buf, size=2000, file_offset=11)
            assert ei.value.code == opends.OPENDS_INVALID_MAPPING_RANGE and ei.value.detail
        assert buf.tobytes() == data[11 : 11 + 65536].tobytes()
        with pytest.raises(opends.Error) as ei:
            opends.buf_deregister(buf)
        assert ei.value.code == opends.OPENDS_MEMORY_NOT_REGISTERED


# -- errors --------------------------------------------------------------------


def test_negative_offset_error(datafile):
    path, _ = datafile
    with opends.File(path) as f:
        with pytest.raises(opends.Error) as ei:
            f.read(bytearray(10), file_offset=-1)
        e = ei.value
        assert e.code == 5022 and e.name == "OPENDS_INVALID_VALUE"
        assert "file_offset" in e.detail and e.detail
        assert isinstance(e, OSError)
        with pytest.raises(opends.Error) as ei:
            f.read_async(bytearray(10), file_offset=-5)
        assert ei.value.code == 5022 and ei.value.detail
        with pytest.raises(opends.Error) as ei:
            f.read(bytearray(10), buf_offset=-1, size=1)
        assert ei.value.code == 5022 and "buf_offset" in ei.value.detail


def test_write_through_readonly_is_ebadf(datafile):
    path, data = datafile
    with opends.File(path, "r") as f:
        with pytest.raises(opends.Error) as ei:
            f.write(b"abc")
        e = ei.value
        assert e.errno == errno.EBADF and e.code == errno.EBADF and e.name == "EBADF"
        assert e.detail
        fut = f.write_async(b"abc")
        with pytest.raises(opends.Error) as e1:
            fut.wait()
        with pytest.raises(opends.Error) as e2:
            fut.wait()  # same outcome twice
        assert e1.value.errno == e2.value.errno == errno.EBADF
    with opends.File(path, "w") as f:  # and reading through write-only
        with pytest.raises(opends.Error) as ei:
            f.read(bytearray(3))
        assert ei.value.errno == errno.EBADF
    assert open(path, "rb").read() == b""  # 'w' truncated, nothing written


def test_bad_handle_errors(datafile):
    path, _ = datafile
    fd = os.open(path, os.O_RDONLY)
    try:
        with opends.File(fd) as f:
            with pytest.raises(opends.Error) as ei:
                opends.File(fd)
            assert ei.value.code == opends.OPENDS_HANDLE_ALREADY_REGISTERED
            # pull the handle out from under the object: the library must say so
            h = f.handle
            opends._lib.check(opends._lib.lib.opends_handle_deregister(h))
            with pytest.raises(opends.Error) as ei:
                f.read(bytearray(4))
            assert ei.value.code == opends.OPENDS_HANDLE_NOT_REGISTERED and ei.value.detail
            with pytest.raises(opends.Error):
                f.close()  # deregistering again reports it
    finally:
        os.close(fd)


def test_not_a_regular_file():
    r, w = os.pipe()
    try:
        with pytest.raises(opends.Error) as ei:
            opends.File(r)
        assert ei.value.code == opends.OPENDS_INVALID_FILE_TYPE
    finally:
        os.close(r)
        os.close(w)


def test_buffer_checks(datafile):
    path, _ = datafile
    with opends.File(path) as f:
        with pytest.raises(TypeError):
            f.read(b"readonly bytes")
        ro = np.zeros(10, np.uint8)
        ro.flags.writeable = False
        with pytest.raises(TypeError):
            f.read(ro)
        with pytest.raises(TypeError):
            f.read(memoryview(bytearray(10)).toreadonly())
        with pytest.raises(ValueError):
            f.read(np.zeros((10, 10), np.uint8)[:, ::2])
        with pytest.raises(ValueError):
            f.read(memoryview(bytearray(10))[::2])
        with pytest.raises(TypeError):
            f.read(12345)
        with pytest.raises(opends.Error) as ei:
            f.read(bytearray(10), size=11)
        assert ei.value.code == 5022 and "exceeds" in ei.value.detail
        with pytest.raises(opends.Error) as ei:
            f.read(bytearray(10), size=-1)
        assert ei.value.code == 5022
        # a contiguous view with strides of extent-1 dims is accepted
        col = np.zeros((10, 1), np.uint8)
        assert f.read(col[:, :]) == 10
        assert f.read(np.zeros(0, np.uint8)) == 0
        # bytearray can't be resized while a read holds its export
        ba = bytearray(100)
        fut = f.read_async(ba)
        fut.wait()


def test_error_object():
    e = opends.Error(5022, "x: y is bad")
    assert str(e) == "OPENDS_INVALID_VALUE (5022): invalid argument: x: y is bad"
    e2 = pickle.loads(pickle.dumps(e))
    assert (e2.code, e2.name, e2.detail) == (5022, "OPENDS_INVALID_VALUE", "x: y is bad")
    assert opends.Error(errno.EIO).errno == errno.EIO
    assert opends.code_name(5027) == "OPENDS_HANDLE_NOT_REGISTERED"
    assert opends.status_string(-5001) == "driver is not open"


# -- driver --------------------------------------------------------------------


def test_driver_reopen_keeps_files(driver, datafile):
    path, data = datafile
    with opends.File(path) as f:
        b = bytearray(8)
        assert f.read(b) == 8
        opends.driver_close()
        assert not opends.is_open()
        assert f.read(b, file_offset=8) == 8  # reopens, re-registers
        assert opends.is_open() and opends.backend() == driver[0]
        assert bytes(b) == data[8:16].tobytes()
    props = opends.properties()
    assert props["max_batch_io_size"] >= 1 and props["major_version"] == opends.library_version()[0]


def test_bad_configuration_reports_variable(monkeypatch):
    opends.driver_close()
    monkeypatch.setenv("OPENDS_IO_THREADS", "zero")
    with pytest.raises(opends.Error) as ei:
        opends.driver_open()
    assert ei.value.code == opends.OPENDS_DRIVER_INVALID_PROPS
    assert "OPENDS_IO_THREADS" in ei.value.detail
    monkeypatch.delenv("OPENDS_IO_THREADS")
    opends.driver_open()


_CHILD = textwrap.dedent(
    """
    import atexit, os, signal, sys
    # registered before opends' own handler, so it runs after it
    atexit.register(lambda: print("at exit open=%s" % opends.is_open(), flush=True))
    import opends
    opends.install_signal_handlers()
    mode = sys.argv[1]
    if mode == "chain":
        seen = []
        signal.signal(signal.SIGTERM, lambda s, f: seen.append(s))
    p = sys.argv[2]
    with opends.File(p, "w+") as f:
        f.pread(bytearray(1 << 20))
        f.write(b"x" * 4096)
        fut = f.read_async(bytearray(4096))
        if mode == "term":
            os.kill(os.getpid(), signal.SIGTERM)
            print("not reached", flush=True)
        elif mode == "int":
            try:
                os.kill(os.getpid(), signal.SIGINT)
            except KeyboardInterrupt:
                print("kbint", fut.wait(), opends.is_open(), flush=True)
            os.kill(os.getpid(), signal.SIGINT)
        else:
            os.kill(os.getpid(), signal.SIGTERM)
            print("chained", seen, opends.is_open(), fut.wait(), flush=True)
    """
)


@pytest.mark.parametrize("mode", ["term", "int", "chain"])
def test_signals(driver, tmp_path, mode):
    if mode == "int" and signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        pytest.skip("SIGINT is ignored in this process (a background job); the child inherits that")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    r = subprocess.run(
        [sys.executable, "-c", _CHILD, mode, str(tmp_path / "sig.bin")],
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
    )
    if mode == "term":
        assert r.returncode == -signal.SIGTERM and "not reached" not in r.stdout, r.stderr
        assert "Fatal" not in r.stderr and "Segmentation" not in r.stderr
    elif mode == "int":
        assert "kbint 4096 True" in r.stdout, r.stderr
        assert "KeyboardInterrupt" in r.stderr and r.returncode in (1, -signal.SIGINT), r.stderr
        assert "at exit open=False" in r.stdout
    else:
        assert r.returncode == 0, r.stderr
        assert "chained [%d] True 4096" % signal.SIGTERM in r.stdout
        assert "at exit open=False" in r.stdout
