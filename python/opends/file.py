"""Files and futures: File, Future, describe()."""

import concurrent.futures as _cf
import ctypes
import io
import os
import queue
import threading
import time
import weakref
from typing import Any, Optional, Union

from . import _lib
from ._buffer import get_buffer
from ._lib import Error, check, lib
from ._util import Closing, as_int, invalid, resolve, track, untrack

__all__ = ["File", "Future", "describe", "DEFAULT_TASK_SIZE"]

#: Piece size of File.pread/pwrite when task_size is not given (64 MiB).
DEFAULT_TASK_SIZE = 64 << 20

#: File.advise's names -> OPENDS_ADVICE_* (include/opends/handles.h).
ADVICE = {"normal": 0, "sequential": 1, "random": 2}

#: Anything get_buffer() accepts: torch tensors, __cuda_array_interface__,
#: __array_interface__, __dlpack__ or buffer-protocol objects.
Buffer = Any
PathOrFd = Union[str, bytes, "os.PathLike[str]", int, Any]

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


# URL sources (opends_handle_open_url): open(2) access modes only
_URL_MODES = {"r": os.O_RDONLY, "r+": os.O_RDWR}


def is_url(path) -> bool:
    """True for "scheme://..." (a source the library opens by URL, such as
    rados://POOL/OID); a local path never has "://" before its first "/"."""
    p = os.fsdecode(path) if isinstance(path, bytes) else path
    i = p.find("://")
    return i > 0 and "/" not in p[:i]


def _mode_flags(mode: str) -> int:
    if not isinstance(mode, str):
        raise TypeError("File: mode must be a str such as 'r' or 'w', not %s" % type(mode).__name__)
    m = mode.replace("b", "")
    if m not in _MODES:
        raise ValueError("File: invalid mode %r (expected one of r, r+, w, w+, a, a+, x, x+)" % (mode,))
    return _MODES[m]


# ---------------------------------------------------------------------------
# Futures
# ---------------------------------------------------------------------------

# One thread collects the futures that someone watches without waiting on
# them (add_done_callback, concurrent.futures.wait/as_completed, asyncio);
# started on first need, never for plain wait().
_reap_q: "Optional[queue.SimpleQueue]" = None
_reap_lock = threading.Lock()


def _reap_loop(q: "queue.SimpleQueue") -> None:
    while True:
        q.get()._drain()


def _reap(fut: "Future") -> None:
    global _reap_q
    with _reap_lock:
        if _reap_q is None:
            _reap_q = queue.SimpleQueue()
            threading.Thread(target=_reap_loop, args=(_reap_q,), name="opends-futures", daemon=True).start()
    _reap_q.put(fut)


class _Waiters(list):
    """Future._waiters: concurrent.futures.wait() and as_completed() append
    their waiter here, which is when the operation needs collecting."""

    def __init__(self, fut: "Future"):
        super().__init__()
        self._fut = weakref.ref(fut)

    def append(self, w) -> None:
        super().append(w)
        f = self._fut()
        if f is not None:
            f._watch()


class Future(_cf.Future):
    """The result of File.read_async / write_async / pread / pwrite.

    A :class:`concurrent.futures.Future`: ``result(timeout)`` (aliases
    ``wait()``, ``get()``) returns the bytes moved or raises
    :class:`opends.Error`, again and again; ``done()`` never blocks;
    ``exception()``, ``add_done_callback()``, ``concurrent.futures.wait()``
    / ``as_completed()``, ``asyncio.wrap_future()`` and ``await fut`` work.
    ``cancel()`` returns False: I/O in flight is not cancelled.

    It holds one or more C operations (opends_async_future_t records) and
    keeps their memory, buffer and file alive until they are collected.
    Until then it is also held by a module registry, so dropping it
    unawaited is safe (it is collected at file or driver close).
    """

    def __init__(self, file: "Optional[File]", ref, size: int):
        super().__init__()
        self._waiters = _Waiters(self)
        self._file = file
        self._ref = ref
        self._cfuts: list = []
        self._lock = threading.Lock()
        self._value: Optional[int] = None
        self._error: Optional[Error] = None
        self._resolved = False
        self._watched = False
        #: Bytes requested.
        self.size = size

    @classmethod
    def _completed(cls, value: int) -> "Future":
        f = cls(None, None, value)
        f._value = value
        f._resolved = True
        _cf.Future.set_result(f, value)
        return f

    def _drain(self) -> None:
        """Collect every C operation (never raises)."""
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
        untrack(self)
        # tell concurrent.futures waiters, callbacks and asyncio
        if self._error is not None:
            _cf.Future.set_exception(self, self._error)
        else:
            _cf.Future.set_result(self, self._value)

    def _watch(self) -> None:
        if not self._watched and not self._resolved:
            self._watched = True
            _reap(self)

    def done(self) -> bool:
        """True when every operation has completed (never blocks)."""
        if self._resolved:
            return True
        if not self._lock.acquire(blocking=False):
            return False  # being collected right now
        try:
            ready = all(lib.opends_async_poll(ctypes.byref(cf)) == 1 for cf in self._cfuts)
        finally:
            self._lock.release()
        if ready:
            self._drain()
        return ready

    def running(self) -> bool:
        return not self.done()

    def cancel(self) -> bool:
        """I/O in flight cannot be cancelled: always False."""
        return False

    def cancelled(self) -> bool:
        return False

    def wait(self, timeout: Optional[float] = None) -> int:
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
        assert self._value is not None
        return self._value

    result = wait
    get = wait

    def exception(self, timeout: Optional[float] = None) -> Optional[BaseException]:
        """The Error the operation failed with, or None (waits like wait())."""
        try:
            self.wait(timeout)
        except Error as e:
            return e
        return None

    def add_done_callback(self, fn) -> None:
        """Call fn(future) once done (from the collecting thread, or now)."""
        _cf.Future.add_done_callback(self, fn)
        self._watch()

    def __await__(self):
        import asyncio  # not at import time: it costs ~20 ms

        if self.done():
            return self.wait()
        return (yield from asyncio.wrap_future(self).__await__())

    def __repr__(self) -> str:
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


class File(Closing):
    """A file registered with OpenDS.

    ``File(path, mode="r", direct=False, perm=0o644)`` opens the file itself
    (modes r, r+, w, w+, a, a+, x, x+; 'b' is ignored; ``direct=True`` adds
    O_DIRECT) and closes it on :meth:`close`. In modes 'a' and 'a+' every
    write goes to the end of the file, as with :func:`open`: the writes'
    ``file_offset`` may not be given. ``File(fd)`` (an int, or an object
    with ``fileno()``) registers the caller's descriptor, whose access mode
    then rules, and leaves it open.

    Argument order follows KvikIO's ``CuFile``: ``read/write/pread/pwrite(buf,
    size, file_offset, task_size)``; ``buf_offset`` (where in buf the data
    starts) is keyword-only. ``raw_read/raw_write(buf, size, file_offset,
    dev_offset)`` are one operation each, as in KvikIO.

    The handle is registered on first use (opening the driver if needed) and
    again after the driver was closed and reopened. Use as a context manager.
    All offsets and sizes are in bytes; any alignment works.
    """

    def __init__(self, path_or_fd: PathOrFd, mode: str = "r", direct: bool = False, perm: int = 0o644):
        self._fd = -1
        self._owns = False
        self._closed = True
        self._fh: Optional[int] = None
        self._gen = -1
        self._reg_lock = threading.Lock()
        self._futures: "weakref.WeakSet[Future]" = weakref.WeakSet()
        self._append = False
        self._end = 0
        self._url: Optional[str] = None
        self._url_flags = 0
        self._advice = 0
        self.mode = mode
        self.direct = bool(direct)
        if isinstance(path_or_fd, bool):
            raise TypeError("File: path_or_fd must be a path, an fd or a file object, not bool")
        if isinstance(path_or_fd, int) or (hasattr(path_or_fd, "fileno") and not isinstance(path_or_fd, (str, bytes))):
            fd = path_or_fd if isinstance(path_or_fd, int) else path_or_fd.fileno()
            if fd < 0:
                raise invalid("File: fd %d is negative" % fd)
            self.path = None
            self._fd = fd
        else:
            try:
                self.path = os.fspath(path_or_fd)
            except TypeError:
                raise TypeError(
                    "File: path_or_fd must be a path, an fd or a file object, not %s" % type(path_or_fd).__name__
                ) from None
        if self.path is not None and is_url(self.path):
            _mode_flags(mode)  # a valid mode at all
            m = mode.replace("b", "")
            if m not in _URL_MODES or direct:
                raise ValueError(
                    "File: a URL opens in mode 'r' or 'r+' without direct (objects are not truncated, "
                    "appended to or opened with O_DIRECT), not mode=%r direct=%r" % (mode, direct)
                )
            self._url = os.fsdecode(self.path)
            self._url_flags = _URL_MODES[m]
        elif self.path is not None:
            flags = _mode_flags(mode) | os.O_CLOEXEC
            if direct:
                flags |= os.O_DIRECT
            self._fd = os.open(self.path, flags, perm)
            self._owns = True
            if mode.replace("b", "") in ("a", "a+"):
                # no O_APPEND: the library's pwrite-style writes would all
                # land at the end, even its read-modify-write of partial
                # blocks; the binding places each write at the end instead
                self._append = True
                self._end = os.fstat(self._fd).st_size
        self._closed = False
        try:
            self._handle()
        except BaseException:
            self.close()
            raise

    # -- handle --------------------------------------------------------------

    def _handle(self) -> int:
        if self._closed:
            raise ValueError("I/O operation on a closed opends.File")
        gen = _lib.ensure_open()
        if self._gen == gen:
            return self._fh  # type: ignore[return-value]
        with self._reg_lock:
            if self._gen != gen:
                fh = ctypes.c_void_p()
                if self._url is not None:
                    check(lib.opends_handle_open_url(ctypes.byref(fh), self._url.encode(), self._url_flags))
                else:
                    check(lib.opends_handle_register(ctypes.byref(fh), self._fd))
                if self._advice:  # (a reopened driver: the advice given before)
                    res = lib.opends_handle_advise(fh, self._advice)
                    if res.err:
                        lib.opends_handle_deregister(fh)
                        check(res)
                self._fh, self._gen = fh.value, gen
        return self._fh  # type: ignore[return-value]

    def advise(self, advice: Union[str, int]) -> None:
        """How this file will be read, like posix_fadvise
        (opends_handle_advise): "normal" (the default: read-ahead once two
        synchronous reads in a row continue each other), "sequential"
        (read-ahead from the first read) or "random" (never), or
        OPENDS_ADVICE_NORMAL / _SEQUENTIAL / _RANDOM. Read-ahead serves
        synchronous reads into device memory (opends.h says when and what
        it guarantees). Kept when the driver is reopened."""
        if isinstance(advice, str) and advice in ADVICE:
            code = ADVICE[advice]
        elif isinstance(advice, int) and not isinstance(advice, bool) and advice in ADVICE.values():
            code = advice
        else:
            raise ValueError("advise: advice must be one of %s or OPENDS_ADVICE_* (0, 1, 2), not %r"
                             % (", ".join(map(repr, ADVICE)), advice))  # fmt: skip
        check(lib.opends_handle_advise(self._handle(), code))
        self._advice = code

    def fileno(self) -> int:
        """The file descriptor (ValueError once closed, like io's files;
        io.UnsupportedOperation for a URL, which has none)."""
        if self._closed:
            raise ValueError("I/O operation on a closed opends.File")
        if self._url is not None:
            raise io.UnsupportedOperation("File(%r) is a URL source: it has no file descriptor" % self._url)
        return self._fd

    @property
    def closed(self) -> bool:
        """True after close()."""
        return self._closed

    @property
    def handle(self) -> int:
        """The opends_handle_t as an int (registers if needed)."""
        return self._handle()

    def size(self) -> int:
        """The file's size in bytes (fstat)."""
        return os.fstat(self.fileno()).st_size

    def describe(self) -> str:
        """How OpenDS serves this file (opends_describe): the backend, and
        e.g. whether O_DIRECT or cuFile is used for it."""
        return _describe(self._handle())

    def close(self) -> None:
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
            if self._owns and self._fd >= 0:
                os.close(self._fd)
            self._fd = -1

    def __repr__(self) -> str:
        what = self.path if self.path is not None else "fd=%d" % self._fd
        return "<opends.File %r mode=%r%s>" % (what, self.mode, " closed" if self._closed else "")

    # -- arguments -----------------------------------------------------------

    def _args(self, op: str, write: bool, buf, size, file_offset, buf_offset):
        """(ref, size, file_offset, buf_offset) checked; an append-mode
        write gets the end of the file reserved for it."""
        size = as_int(op, "size", size, allow_none=True)
        buf_offset = as_int(op, "buf_offset", buf_offset)
        ref = get_buffer(buf, not write)
        size = resolve(ref, size, buf_offset, op)
        if write and self._append:
            if file_offset is not None:
                raise ValueError(
                    "%s: file_offset cannot be given for a file opened in mode %r: writes go to its end" % (op, self.mode)
                )
            with self._reg_lock:
                file_offset = max(self._end, os.fstat(self._fd).st_size)
                self._end = file_offset + size
        else:
            file_offset = 0 if file_offset is None else as_int(op, "file_offset", file_offset)
        return ref, size, file_offset, buf_offset

    # -- synchronous ---------------------------------------------------------

    def _sync(self, op, write, buf, size, file_offset, task_size, buf_offset) -> int:
        task_size = as_int(op, "task_size", task_size, allow_none=True)
        if task_size:
            return self._submit(op, write, buf, size, file_offset, buf_offset, task_size).wait()
        ref, size, file_offset, buf_offset = self._args(op, write, buf, size, file_offset, buf_offset)
        fh = self._handle()
        if size == 0 and not ref.ptr:
            return 0
        fn = lib.opends_sync_write if write else lib.opends_sync_read
        return _lib.check_ssize(fn(fh, ref.ptr, size, file_offset, buf_offset))

    def read(
        self,
        buf: Buffer,
        size: Optional[int] = None,
        file_offset: Optional[int] = None,
        task_size: Optional[int] = None,
        *,
        buf_offset: int = 0,
    ) -> int:
        """Read up to size bytes (default: the rest of buf after buf_offset)
        at file_offset (default 0) into buf + buf_offset; return the bytes
        read (fewer at EOF, 0 past it). One library call, or task_size
        pieces in flight at once when task_size is given."""
        return self._sync("read", False, buf, size, file_offset, task_size, buf_offset)

    def read_fanout(
        self,
        bufs: "list",
        size: Optional[int] = None,
        file_offset: Optional[int] = None,
        *,
        buf_offsets: "Optional[list]" = None,
    ) -> int:
        """Read once, place everywhere (opends_sync_read_fanout): read up to
        size bytes at file_offset (default 0) once and place them in every
        buffer of bufs (1 to 64; e.g. one tensor per GPU) at its
        buf_offsets entry (default 0). size defaults to the smallest room
        left in any of them. Returns the bytes read (fewer at EOF), which
        every buffer then holds; GPU to GPU copies go over peer links where
        the devices have them. Every buffer is checked before anything is
        read; they must not overlap."""
        op = "read_fanout"
        if isinstance(bufs, (str, bytes)) or not hasattr(bufs, "__len__"):
            raise TypeError("%s: bufs must be a list of buffers, not %s" % (op, type(bufs).__name__))
        n = len(bufs)
        if not 1 <= n <= 64:
            raise ValueError("%s: bufs holds %d buffers; 1 to 64 are allowed" % (op, n))
        if buf_offsets is None:
            buf_offsets = [0] * n
        elif len(buf_offsets) != n:
            raise ValueError("%s: buf_offsets has %d entries for %d buffers" % (op, len(buf_offsets), n))
        size = as_int(op, "size", size, allow_none=True)
        offs = [as_int(op, "buf_offsets[%d]" % i, o) for i, o in enumerate(buf_offsets)]
        refs = [get_buffer(b, True) for b in bufs]
        if size is None:
            size = min(resolve(r, None, o, op) for r, o in zip(refs, offs))
        else:
            for r, o in zip(refs, offs):
                resolve(r, size, o, op)
        file_offset = 0 if file_offset is None else as_int(op, "file_offset", file_offset)
        fh = self._handle()
        if size == 0:
            return 0
        ptrs = (ctypes.c_void_p * n)(*[r.ptr for r in refs])
        coffs = (_lib.c_off_t * n)(*offs)
        return _lib.check_ssize(lib.opends_sync_read_fanout(fh, ptrs, coffs, n, size, file_offset))

    def write(
        self,
        buf: Buffer,
        size: Optional[int] = None,
        file_offset: Optional[int] = None,
        task_size: Optional[int] = None,
        *,
        buf_offset: int = 0,
    ) -> int:
        """Write size bytes (default: the rest of buf after buf_offset) from
        buf + buf_offset at file_offset (default 0; the end in mode 'a');
        return the bytes written."""
        return self._sync("write", True, buf, size, file_offset, task_size, buf_offset)

    def raw_read(
        self, buf: Buffer, size: Optional[int] = None, file_offset: Optional[int] = 0, dev_offset: int = 0
    ) -> int:
        """KvikIO's raw_read: one read of size bytes at file_offset into
        buf + dev_offset (any memory, not only device memory)."""
        return self._sync("raw_read", False, buf, size, file_offset, None, dev_offset)

    def raw_write(
        self, buf: Buffer, size: Optional[int] = None, file_offset: Optional[int] = 0, dev_offset: int = 0
    ) -> int:
        """KvikIO's raw_write: one write of size bytes from buf + dev_offset."""
        if self._append and file_offset == 0:
            file_offset = None
        return self._sync("raw_write", True, buf, size, file_offset, None, dev_offset)

    # -- futures -------------------------------------------------------------

    def _submit(self, op, write, buf, size, file_offset, buf_offset, task_size) -> Future:
        ref, size, file_offset, buf_offset = self._args(op, write, buf, size, file_offset, buf_offset)
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
        track(fut)
        return fut

    def read_async(
        self, buf: Buffer, size: Optional[int] = None, file_offset: Optional[int] = None, *, buf_offset: int = 0
    ) -> Future:
        """Start one read (opends_async_read) and return a :class:`Future`.
        Argument errors raise here; I/O errors are raised by wait()."""
        return self._submit("read_async", False, buf, size, file_offset, buf_offset, None)

    def write_async(
        self, buf: Buffer, size: Optional[int] = None, file_offset: Optional[int] = None, *, buf_offset: int = 0
    ) -> Future:
        """Start one write (opends_async_write) and return a :class:`Future`."""
        return self._submit("write_async", True, buf, size, file_offset, buf_offset, None)

    def pread(
        self,
        buf: Buffer,
        size: Optional[int] = None,
        file_offset: Optional[int] = None,
        task_size: Optional[int] = None,
        *,
        buf_offset: int = 0,
    ) -> Future:
        """Like read_async, split into task_size pieces (default
        DEFAULT_TASK_SIZE, 64 MiB) that all go in flight at once; the
        Future's result is the total (short at EOF). KvikIO's order."""
        ts = as_int("pread", "task_size", task_size, allow_none=True)
        return self._submit("pread", False, buf, size, file_offset, buf_offset, ts or DEFAULT_TASK_SIZE)

    def pwrite(
        self,
        buf: Buffer,
        size: Optional[int] = None,
        file_offset: Optional[int] = None,
        task_size: Optional[int] = None,
        *,
        buf_offset: int = 0,
    ) -> Future:
        """Like write_async, split into task_size pieces (see pread)."""
        ts = as_int("pwrite", "task_size", task_size, allow_none=True)
        return self._submit("pwrite", True, buf, size, file_offset, buf_offset, ts or DEFAULT_TASK_SIZE)


# ---------------------------------------------------------------------------
# describe
# ---------------------------------------------------------------------------


def _describe(fh: Optional[int]) -> str:
    out = ctypes.create_string_buffer(1024)
    check(lib.opends_describe(fh, out, len(out)))
    return out.value.decode("utf-8", "replace")


def describe(path: "Optional[Union[str, bytes, os.PathLike[str]]]" = None) -> str:
    """How OpenDS would serve path (opened read-only), as a sentence from
    opends_describe: the backend, the accelerator, O_DIRECT or cuFile use.
    Without a path: the active backend and accelerator. Opens the driver."""
    _lib.ensure_open()
    if path is None:
        return _describe(None)
    with File(path, "r") as f:
        return f.describe()
