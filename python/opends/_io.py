"""Files, futures, streams, batches and buffer registration."""

import asyncio
import ctypes
import os
import threading
import time
import weakref

from . import _lib
from ._buffer import get_buffer
from ._lib import Error, check, lib

__all__ = [
    "File",
    "Future",
    "Stream",
    "StreamOp",
    "Batch",
    "BatchOp",
    "BatchEvent",
    "registered",
    "buf_register",
    "buf_deregister",
    "DEFAULT_TASK_SIZE",
]

#: Piece size of File.pread/pwrite when task_size is not given (64 MiB).
DEFAULT_TASK_SIZE = 64 << 20

def _invalid(detail):
    return Error(_lib.OPENDS_INVALID_VALUE, detail)


def _resolve(ref, size, buf_offset, op):
    """Check and return the byte count of an operation on ref."""
    if buf_offset < 0:
        # the library rejects it with its own detail; don't bounds-check
        return 0 if size is None else size
    if size is None:
        if buf_offset > ref.nbytes:
            raise _invalid("%s: buf_offset %d is past the end of the %d-byte buffer" % (op, buf_offset, ref.nbytes))
        return ref.nbytes - buf_offset
    size = int(size)
    if size < 0:
        raise _invalid("%s: size %d is negative" % (op, size))
    if buf_offset + size > ref.nbytes:
        raise _invalid(
            "%s: buf_offset %d + size %d exceeds the buffer's %d bytes" % (op, buf_offset, size, ref.nbytes)
        )
    return size


_MODES = {
    "r": os.O_RDONLY,
    "r+": os.O_RDWR,
    "w": os.O_WRONLY | os.O_CREAT | os.O_TRUNC,
    "w+": os.O_RDWR | os.O_CREAT | os.O_TRUNC,
    "a": os.O_WRONLY | os.O_CREAT,
    "a+": os.O_RDWR | os.O_CREAT,
    "x": os.O_WRONLY | os.O_CREAT | os.O_EXCL,
    "x+": os.O_RDWR | os.O_CREAT | os.O_EXCL,
}


def _mode_flags(mode):
    m = mode.replace("b", "")
    if m not in _MODES:
        raise ValueError("invalid mode %r (expected one of r, r+, w, w+, a, a+, x, x+)" % (mode,))
    return _MODES[m]


def _track(fut):
    with _lib._pending_lock:
        _lib.pending[id(fut)] = fut


def _untrack(fut):
    with _lib._pending_lock:
        _lib.pending.pop(id(fut), None)


# ---------------------------------------------------------------------------
# Futures
# ---------------------------------------------------------------------------


class _Closing:
    """Context manager and finaliser for objects with close()."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


class Future:
    """The result of File.read_async / write_async / pread / pwrite.

    One or more C operations (opends_async_future_t records) whose memory,
    and the buffer and file they use, this object keeps alive until they are
    collected. Until then it is also held by a module registry, so dropping
    it unawaited is safe (it is collected at file or driver close).

    ``wait()`` (aliases ``result()``, ``get()``) returns the bytes moved, or
    raises :class:`opends.Error`; calling it again returns (or raises) the
    same. ``done()`` never blocks. ``await fut`` works in asyncio.
    """

    def __init__(self, file, ref, size):
        self._file = file
        self._ref = ref
        self._cfuts = []
        self._lock = threading.Lock()
        self._value = None
        self._error = None
        self._resolved = False
        #: Bytes requested.
        self.size = size

    @classmethod
    def _completed(cls, value):
        f = cls(None, None, value)
        f._value = value
        f._resolved = True
        return f

    def _drain(self):
        """Collect every C operation (never raises); returns nothing."""
        with self._lock:
            if self._resolved:
                return
            total = 0
            for cf in self._cfuts:
                r = lib.opends_async_await(ctypes.byref(cf))
                if r < 0:
                    if self._error is None:
                        self._error = Error(-r, _lib.last_detail())
                else:
                    total += r
            self._value = total
            self._resolved = True
            self._cfuts = []
            file, self._file = self._file, None
            ref, self._ref = self._ref, None
        if ref is not None:
            ref.release()
        if file is not None:
            file._futures.discard(self)
        _untrack(self)

    def done(self):
        """True when every operation has completed (never blocks)."""
        if self._resolved:
            return True
        with self._lock:
            if self._resolved:
                return True
            return all(lib.opends_async_poll(ctypes.byref(cf)) == 1 for cf in self._cfuts)

    def wait(self, timeout=None):
        """Wait for completion and return the bytes moved (short at EOF for
        reads); raise Error on failure. With a timeout in seconds, raise
        TimeoutError if not done by then (the operation goes on)."""
        if timeout is not None and not self.done():
            end = time.monotonic() + timeout
            delay = 1e-5
            while not self.done():
                if time.monotonic() >= end:
                    raise TimeoutError("opends.Future: not done after %g s" % timeout)
                time.sleep(delay)
                delay = min(delay * 2, 1e-3)
        self._drain()
        if self._error is not None:
            raise self._error
        return self._value

    result = wait
    get = wait

    def __await__(self):
        if self.done():
            return self.wait()
        loop = asyncio.get_running_loop()
        return (yield from loop.run_in_executor(None, self.wait).__await__())

    def __repr__(self):
        if not self._resolved:
            state = "pending"
        elif self._error is not None:
            state = "failed %s" % self._error.name
        else:
            state = "done %d bytes" % self._value
        return "<opends.Future %s>" % state


# ---------------------------------------------------------------------------
# Files
# ---------------------------------------------------------------------------


class File(_Closing):
    """A file registered with OpenDS.

    ``File(path, mode="r", direct=False, perm=0o644)`` opens the file itself
    (modes r, r+, w, w+, a, a+, x, x+; 'b' is ignored; 'a' does not truncate
    and writes land at the offsets given -- there is no append position;
    ``direct=True`` adds O_DIRECT) and closes it on :meth:`close`.
    ``File(fd)`` (an int, or an object with ``fileno()``) registers the
    caller's descriptor, whose access mode then rules, and leaves it open.

    The handle is registered on first use (opening the driver if needed) and
    again after the driver was closed and reopened. Use as a context manager.
    All offsets and sizes are in bytes; any alignment works.
    """

    def __init__(self, path_or_fd, mode="r", direct=False, perm=0o644):
        self._fd = -1
        self._owns = False
        self._closed = True
        self._fh = None
        self._gen = -1
        self._reg_lock = threading.Lock()
        self._futures = weakref.WeakSet()
        self.mode = mode
        self.direct = bool(direct)
        if isinstance(path_or_fd, int) or (hasattr(path_or_fd, "fileno") and not isinstance(path_or_fd, (str, bytes))):
            fd = path_or_fd if isinstance(path_or_fd, int) else path_or_fd.fileno()
            if fd < 0:
                raise _invalid("File: fd %d is negative" % fd)
            self.path = None
            self._fd = fd
        else:
            self.path = os.fspath(path_or_fd)
            flags = _mode_flags(mode) | os.O_CLOEXEC
            if direct:
                flags |= os.O_DIRECT
            self._fd = os.open(self.path, flags, perm)
            self._owns = True
        self._closed = False
        try:
            self._handle()
        except BaseException:
            self.close()
            raise

    # -- handle --------------------------------------------------------------

    def _handle(self):
        if self._closed:
            raise ValueError("I/O operation on a closed opends.File")
        gen = _lib.ensure_open()
        if self._gen == gen:
            return self._fh
        with self._reg_lock:
            if self._gen != gen:
                fh = ctypes.c_void_p()
                check(lib.opends_handle_register(ctypes.byref(fh), self._fd))
                self._fh, self._gen = fh.value, gen
        return self._fh

    def fileno(self):
        """The file descriptor."""
        return self._fd

    @property
    def closed(self):
        """True after close()."""
        return self._closed

    @property
    def handle(self):
        """The opends_handle_t as an int (registers if needed)."""
        return self._handle()

    def size(self):
        """The file's size in bytes (fstat)."""
        return os.fstat(self._fd).st_size

    def close(self):
        """Wait for this file's futures, deregister the handle and close the
        fd if this object opened it. Idempotent."""
        if self._closed:
            return
        for fut in list(self._futures):
            fut._drain()
        self._closed = True
        try:
            if self._fh is not None and self._gen == _lib.generation() and _lib.is_open():
                check(lib.opends_handle_deregister(self._fh))
        finally:
            self._fh = None
            if self._owns:
                os.close(self._fd)
            self._fd = -1


    def __repr__(self):
        what = self.path if self.path is not None else "fd=%d" % self._fd
        return "<opends.File %r mode=%r%s>" % (what, self.mode, " closed" if self._closed else "")

    # -- synchronous ---------------------------------------------------------

    def read(self, buf, size=None, file_offset=0, buf_offset=0):
        """Read up to size bytes (default: the rest of buf after buf_offset)
        at file_offset into buf + buf_offset; return the bytes read (fewer
        at EOF, 0 past it)."""
        ref = get_buffer(buf, True)
        size = _resolve(ref, size, buf_offset, "read")
        fh = self._handle()
        if size == 0 and not ref.ptr:
            return 0
        r = lib.opends_sync_read(fh, ref.ptr, size, file_offset, buf_offset)
        return _lib.check_ssize(r)

    def write(self, buf, size=None, file_offset=0, buf_offset=0):
        """Write size bytes (default: the rest of buf after buf_offset) from
        buf + buf_offset at file_offset; return the bytes written."""
        ref = get_buffer(buf, False)
        size = _resolve(ref, size, buf_offset, "write")
        fh = self._handle()
        if size == 0 and not ref.ptr:
            return 0
        r = lib.opends_sync_write(fh, ref.ptr, size, file_offset, buf_offset)
        return _lib.check_ssize(r)

    # -- futures -------------------------------------------------------------

    def _submit(self, opcode, buf, size, file_offset, buf_offset, task_size):
        write = opcode == "write"
        ref = get_buffer(buf, not write)
        size = _resolve(ref, size, buf_offset, opcode)
        fh = self._handle()
        if size == 0 and not ref.ptr:
            return Future._completed(0)
        fn = lib.opends_async_write if write else lib.opends_async_read
        fut = Future(self, ref, size)
        pieces = [(0, size)]
        if task_size and size > task_size:
            pieces = [(o, min(task_size, size - o)) for o in range(0, size, task_size)]
        try:
            for off, n in pieces:
                cf = _lib.opends_async_future_t()
                res = fn(fh, ref.ptr, n, file_offset + off, buf_offset + off, ctypes.byref(cf))
                if res.err:
                    raise Error(res.err, _lib.last_detail(), res.backend_err)
                fut._cfuts.append(cf)
        except BaseException:
            fut._drain()  # what was started must finish before buf may go
            raise
        self._futures.add(fut)
        _track(fut)
        return fut

    def read_async(self, buf, size=None, file_offset=0, buf_offset=0):
        """Start one read (opends_async_read) and return a :class:`Future`.
        Argument errors raise here; I/O errors are raised by wait()."""
        return self._submit("read", buf, size, file_offset, buf_offset, None)

    def write_async(self, buf, size=None, file_offset=0, buf_offset=0):
        """Start one write (opends_async_write) and return a :class:`Future`."""
        return self._submit("write", buf, size, file_offset, buf_offset, None)

    def pread(self, buf, size=None, file_offset=0, buf_offset=0, task_size=None):
        """Like read_async, split into task_size pieces (default
        DEFAULT_TASK_SIZE, 64 MiB) that all go in flight at once; the
        Future's result is the total (short at EOF)."""
        return self._submit("read", buf, size, file_offset, buf_offset, task_size or DEFAULT_TASK_SIZE)

    def pwrite(self, buf, size=None, file_offset=0, buf_offset=0, task_size=None):
        """Like write_async, split into task_size pieces (see pread)."""
        return self._submit("write", buf, size, file_offset, buf_offset, task_size or DEFAULT_TASK_SIZE)


# ---------------------------------------------------------------------------
# Streams
# ---------------------------------------------------------------------------

_streams = weakref.WeakSet()


def _sync_streams_before_close():
    for s in list(_streams):
        try:
            s.synchronize()
        except Exception:
            pass


_lib._before_close.append(_sync_streams_before_close)


def _stream_ptr(stream):
    if stream is None:
        return 0
    if isinstance(stream, int):
        return stream
    for attr in ("cuda_stream", "ptr", "handle"):  # torch, CuPy, cuda.core
        v = getattr(stream, attr, None)
        if isinstance(v, int):
            return v
    raise TypeError("cannot take a stream handle from %s" % type(stream).__name__)


class StreamOp:
    """An operation queued on a :class:`Stream`. It holds the size, offset
    and result cells that the library reads and writes when the stream
    reaches it. ``wait()`` / ``result`` synchronize the stream if needed and
    return the bytes moved or raise Error."""

    def __init__(self, stream, file, ref, size, file_offset, buf_offset):
        self._stream = stream
        self._file = file
        self._ref = ref
        self.size_cell = ctypes.c_size_t(size)
        self.file_offset_cell = _lib.c_off_t(file_offset)
        self.buf_offset_cell = _lib.c_off_t(buf_offset)
        self.result_cell = _lib.c_ssize_t(0)
        self._complete = False

    def _mark_complete(self):
        self._complete = True
        self._file = None
        if self._ref is not None:
            self._ref.release()
            self._ref = None

    def done(self):
        """True once the stream has been synchronized after this op."""
        return self._complete

    def wait(self):
        """Synchronize the stream if needed; return bytes or raise Error."""
        if not self._complete:
            self._stream.synchronize()
        r = self.result_cell.value
        if r < 0:
            raise Error(-r, "stream operation failed: %s" % _lib.status_string(r))
        return r

    @property
    def result(self):
        """Same as wait()."""
        return self.wait()


class Stream(_Closing):
    """Stream-ordered I/O (cuFileReadAsync / cuFileWriteAsync).

    ``Stream()`` creates a stream of the library's own (a non-blocking CUDA
    stream, or a host-ordered queue without an accelerator), destroyed by
    close(). ``Stream(s)`` wraps a caller's stream: an int CUstream, a
    ``torch.cuda.Stream`` or a CuPy stream (not destroyed). ``Stream.default()``
    is the NULL (default) stream. ``flags`` (OPENDS_STREAM_* bits) are
    passed to opends_stream_register.
    """

    def __init__(self, stream=None, flags=0, _create=True):
        self._owned = stream is None and _create
        self._ext = _stream_ptr(stream)
        self._flags = flags
        self._ptr = None
        self._gen = -1
        self._ops = []
        self._lock = threading.Lock()
        self._closed = False
        self._get()
        _streams.add(self)

    @classmethod
    def default(cls, flags=0):
        """The default (NULL) stream."""
        return cls(None, flags, _create=False)

    def _get(self):
        if self._closed:
            raise ValueError("operation on a closed opends.Stream")
        gen = _lib.ensure_open()
        if self._gen != gen:
            with self._lock:
                if self._gen != gen:
                    if self._owned:
                        p = ctypes.c_void_p()
                        check(lib.opends_stream_create(ctypes.byref(p)))
                        self._ptr = p.value or 0
                    else:
                        self._ptr = self._ext
                    if self._flags:
                        check(lib.opends_stream_register(self._ptr, self._flags))
                    self._gen = gen
        return self._ptr

    @property
    def handle(self):
        """The opends_stream_t as an int (0 for the default stream)."""
        return self._get()

    def _enqueue(self, opcode, file, buf, size, file_offset, buf_offset):
        write = opcode == "write"
        ref = get_buffer(buf, not write)
        size = _resolve(ref, size, buf_offset, "stream_" + opcode)
        s = self._get()
        fh = file._handle()
        op = StreamOp(self, file, ref, size, file_offset, buf_offset)
        fn = lib.opends_stream_write if write else lib.opends_stream_read
        with self._lock:
            check(
                fn(
                    fh,
                    ref.ptr,
                    ctypes.byref(op.size_cell),
                    ctypes.byref(op.file_offset_cell),
                    ctypes.byref(op.buf_offset_cell),
                    ctypes.byref(op.result_cell),
                    s,
                )
            )
            self._ops.append(op)
        return op

    def stream_read(self, file, buf, size=None, file_offset=0, buf_offset=0):
        """Queue a read from file into buf on this stream; return a
        :class:`StreamOp`."""
        return self._enqueue("read", file, buf, size, file_offset, buf_offset)

    def stream_write(self, file, buf, size=None, file_offset=0, buf_offset=0):
        """Queue a write of buf to file on this stream; return a
        :class:`StreamOp`."""
        return self._enqueue("write", file, buf, size, file_offset, buf_offset)

    def synchronize(self):
        """Wait until everything queued on the stream has completed."""
        if self._gen == _lib.generation() and _lib.is_open():
            with self._lock:
                ops, self._ops = self._ops, []
            check(lib.opends_stream_synchronize(self._ptr))
        else:  # the driver closed (and waited for everything) meanwhile
            with self._lock:
                ops, self._ops = self._ops, []
        for op in ops:
            op._mark_complete()

    def close(self):
        """Synchronize, then destroy the stream if this object created it."""
        if self._closed:
            return
        try:
            self.synchronize()
        finally:
            self._closed = True
            if self._gen == _lib.generation() and _lib.is_open():
                if self._flags:
                    lib.opends_stream_deregister(self._ptr)
                if self._owned:
                    check(lib.opends_stream_destroy(self._ptr))



# ---------------------------------------------------------------------------
# Batches
# ---------------------------------------------------------------------------

READ, WRITE = 0, 1
_STATUS = {1: "WAITING", 2: "PENDING", 4: "INVALID", 8: "CANCELED", 16: "COMPLETE", 32: "TIMEOUT", 64: "FAILED"}


class BatchOp:
    """One entry of a batch: ``BatchOp(opcode, file, buf, size=None,
    file_offset=0, buf_offset=0, cookie=None)``; opcode is "read"/"write"
    (or READ/WRITE). Tuples and dicts with these fields are accepted by
    :meth:`Batch.submit` too."""

    __slots__ = ("opcode", "file", "buf", "size", "file_offset", "buf_offset", "cookie", "_ref")

    def __init__(self, opcode, file, buf, size=None, file_offset=0, buf_offset=0, cookie=None):
        if opcode in ("read", READ):
            opcode = READ
        elif opcode in ("write", WRITE):
            opcode = WRITE
        else:
            raise ValueError("BatchOp: opcode must be 'read' or 'write', not %r" % (opcode,))
        self.opcode = opcode
        self.file = file
        self.buf = buf
        self.size = size
        self.file_offset = file_offset
        self.buf_offset = buf_offset
        self.cookie = cookie
        self._ref = None

    def __repr__(self):
        return "<BatchOp %s size=%s file_offset=%d cookie=%r>" % (
            "read" if self.opcode == READ else "write",
            self.size,
            self.file_offset,
            self.cookie,
        )


class BatchEvent:
    """A completion from :meth:`Batch.get_status`: ``op`` (the BatchOp),
    ``cookie`` (op.cookie), ``status`` (int, OPENDS_COMPLETE=0x10 ...),
    ``status_name`` ('COMPLETE', 'FAILED', 'CANCELED', ...), ``ret`` (bytes or
    a negated error), ``ok``, ``error`` (Error or None)."""

    __slots__ = ("op", "status", "ret")

    def __init__(self, op, status, ret):
        self.op, self.status, self.ret = op, status, ret

    @property
    def cookie(self):
        return self.op.cookie

    @property
    def status_name(self):
        return _STATUS.get(self.status, "UNKNOWN")

    @property
    def ok(self):
        return self.status == 0x10

    @property
    def error(self):
        if self.status == 0x40 and self.ret < 0:
            return Error(-self.ret, "batch entry failed")
        return None

    def __repr__(self):
        return "<BatchEvent %s ret=%d cookie=%r>" % (self.status_name, self.ret, self.cookie)


class Batch(_Closing):
    """cuFile-style batch I/O: ``Batch(max_nr)`` holds up to max_nr entries
    in flight. :meth:`submit` a list of ops, collect with
    :meth:`get_status` / :meth:`wait`, :meth:`cancel`, :meth:`close` (also
    on context-manager exit). Buffers are kept alive until their completion
    is delivered."""

    def __init__(self, max_nr):
        self.max_nr = int(max_nr)
        self._gen = _lib.ensure_open()
        b = ctypes.c_void_p()
        check(lib.opends_batch_setup(ctypes.byref(b), self.max_nr))
        self._b = b.value
        self._inflight = {}
        self._next = 1
        self._lock = threading.Lock()
        self._closed = False

    def _get(self):
        if self._closed:
            raise ValueError("operation on a closed opends.Batch")
        if self._gen != _lib.generation() or not _lib.is_open():
            raise _invalid("the batch was destroyed when the driver closed")
        return self._b

    @property
    def in_flight(self):
        """Entries submitted and not yet delivered."""
        return len(self._inflight)

    def submit(self, ops):
        """Submit ops (BatchOp, tuple or dict each) all or nothing; return
        the list of BatchOp objects."""
        b = self._get()
        ops = [
            o if isinstance(o, BatchOp) else (BatchOp(**o) if isinstance(o, dict) else BatchOp(*o)) for o in ops
        ]
        if not ops:
            raise _invalid("Batch.submit: no operations")
        params = (_lib.opends_io_params_t * len(ops))()
        tokens = []
        with self._lock:
            for i, op in enumerate(ops):
                ref = get_buffer(op.buf, op.opcode == READ, "ops[%d].buf" % i)
                size = _resolve(ref, op.size, op.buf_offset, "ops[%d]" % i)
                p = params[i]
                p.mode = 1
                p.u.batch.buf_base = ref.ptr
                p.u.batch.file_offset = op.file_offset
                p.u.batch.buf_offset = op.buf_offset
                p.u.batch.size = size
                p.fh = op.file._handle()
                p.opcode = op.opcode
                p.cookie = self._next + i
                op._ref = ref
                tokens.append(self._next + i)
            res = lib.opends_batch_submit(b, len(ops), params, 0)
            if res.err:
                for op in ops:
                    op._ref = None
                raise Error(res.err, _lib.last_detail(), res.backend_err)
            self._next += len(ops)
            for t, op in zip(tokens, ops):
                self._inflight[t] = op
        return ops

    def get_status(self, min_nr=0, max_nr=None, timeout=None):
        """Collect up to max_nr (default: all in flight) completions,
        waiting for at least min_nr; timeout in seconds (None: no limit).
        Returns a list of :class:`BatchEvent`."""
        b = self._get()
        n = max_nr if max_nr is not None else max(len(self._inflight), 1)
        events = (_lib.opends_io_events_t * n)()
        nr = ctypes.c_uint(n)
        ts = None
        if timeout is not None:
            ts = _lib.timespec(int(timeout), int((timeout - int(timeout)) * 1e9))
        check(
            lib.opends_batch_get_status(b, min_nr, ctypes.byref(nr), events, ctypes.byref(ts) if ts else None)
        )
        out = []
        with self._lock:
            for i in range(nr.value):
                e = events[i]
                op = self._inflight.pop(e.cookie, None)
                if op is None:
                    continue
                if op._ref is not None:
                    op._ref.release()
                    op._ref = None
                out.append(BatchEvent(op, e.status, e.ret))
        return out

    def wait(self):
        """Collect every completion still undelivered."""
        out = []
        while self._inflight:
            n = len(self._inflight)
            out += self.get_status(min_nr=n, max_nr=n)
        return out

    def cancel(self):
        """Cancel entries not yet started (delivered as CANCELED)."""
        check(lib.opends_batch_cancel(self._get()))

    def close(self):
        """Wait for entries in flight and destroy the batch."""
        if self._closed:
            return
        self._closed = True
        if self._gen == _lib.generation() and _lib.is_open():
            check(lib.opends_batch_destroy(self._b))
        for op in self._inflight.values():
            if op._ref is not None:
                op._ref.release()
                op._ref = None
        self._inflight.clear()



# ---------------------------------------------------------------------------
# Buffer registration
# ---------------------------------------------------------------------------

_regs = {}
_regs_lock = threading.Lock()


def buf_register(buf):
    """Register buf's memory (opends_buf_register; an optimisation, never
    required). Returns buf. The buffer is kept alive until
    :func:`buf_deregister`."""
    ref = get_buffer(buf, False)
    gen = _lib.ensure_open()
    check(lib.opends_buf_register(ref.ptr, ref.nbytes, 0))
    with _regs_lock:
        _regs[ref.ptr] = (ref, gen)
    return buf


def buf_deregister(buf):
    """Deregister memory registered by :func:`buf_register`."""
    ref = get_buffer(buf, False)
    with _regs_lock:
        old = _regs.pop(ref.ptr, None)
    if old is not None and old[1] != _lib.generation():
        old[0].release()
        return  # the driver closed since; nothing to deregister
    _lib.ensure_open()
    check(lib.opends_buf_deregister(ref.ptr))
    if old is not None:
        old[0].release()


class registered:
    """Context manager: ``with opends.registered(buf) as b: ...`` registers
    buf on entry and deregisters it on exit."""

    def __init__(self, buf):
        self.buf = buf

    def __enter__(self):
        buf_register(self.buf)
        return self.buf

    def __exit__(self, *exc):
        buf_deregister(self.buf)
