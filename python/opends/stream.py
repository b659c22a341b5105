"""Stream-ordered I/O: Stream and StreamOp (cuFileReadAsync/WriteAsync)."""

import ctypes
import threading
import weakref
from typing import Any, Optional

from . import _lib
from ._buffer import get_buffer
from ._lib import Error, check, lib
from ._util import Closing, as_int, resolve

__all__ = ["Stream", "StreamOp"]

_streams: "weakref.WeakSet[Stream]" = weakref.WeakSet()


def _sync_streams_before_close() -> None:
    for s in list(_streams):
        try:
            s.synchronize()
        except Exception:
            pass


_lib._before_close.append(_sync_streams_before_close)


def _stream_ptr(stream: Any) -> int:
    if stream is None:
        return 0
    if isinstance(stream, int) and not isinstance(stream, bool):
        return stream
    for attr in ("cuda_stream", "ptr", "handle"):  # torch, CuPy, cuda.core
        v = getattr(stream, attr, None)
        if isinstance(v, int):
            return v
    raise TypeError(
        "Stream: stream must be an int CUstream, a torch.cuda.Stream, a CuPy stream or None, not %s"
        % type(stream).__name__
    )


class StreamOp:
    """An operation queued on a :class:`Stream`. It holds the size, offset
    and result cells that the library reads and writes when the stream
    reaches it. ``wait()`` / ``result`` synchronize the stream if needed and
    return the bytes moved or raise Error."""

    def __init__(self, stream: "Stream", file, ref, size: int, file_offset: int, buf_offset: int):
        self._stream = stream
        self._file = file
        self._ref = ref
        self.size_cell = ctypes.c_size_t(size)
        self.file_offset_cell = _lib.c_off_t(file_offset)
        self.buf_offset_cell = _lib.c_off_t(buf_offset)
        self.result_cell = _lib.c_ssize_t(0)
        self._complete = False

    def _mark_complete(self) -> None:
        self._complete = True
        self._file = None
        if self._ref is not None:
            self._ref.release()
            self._ref = None

    def done(self) -> bool:
        """True once the stream has been synchronized after this op."""
        return self._complete

    def wait(self) -> int:
        """Synchronize the stream if needed; return bytes or raise Error."""
        if not self._complete:
            self._stream.synchronize()
        r = self.result_cell.value
        if r < 0:
            raise Error(-r, "stream operation failed: %s" % _lib.status_string(r))
        return r

    @property
    def result(self) -> int:
        """Same as wait()."""
        return self.wait()

    def __repr__(self) -> str:
        state = "done %d" % self.result_cell.value if self._complete else "queued"
        return "<opends.StreamOp size=%d file_offset=%d %s>" % (
            self.size_cell.value,
            self.file_offset_cell.value,
            state,
        )


class Stream(Closing):
    """Stream-ordered I/O (cuFileReadAsync / cuFileWriteAsync).

    ``Stream()`` creates a stream of the library's own (a non-blocking CUDA
    stream, or a host-ordered queue without an accelerator), destroyed by
    close(). ``Stream(s)`` wraps a caller's stream: an int CUstream, a
    ``torch.cuda.Stream`` or a CuPy stream (not destroyed). ``Stream.default()``
    is the NULL (default) stream. ``flags`` (OPENDS_STREAM_* bits) are
    passed to opends_stream_register.
    """

    def __init__(self, stream: Any = None, flags: int = 0, _create: bool = True):
        self._closed = True
        self._owned = stream is None and _create
        self._ext = _stream_ptr(stream)
        self._flags = as_int("Stream", "flags", flags)
        self._ptr: Optional[int] = None
        self._gen = -1
        self._ops: list = []
        self._lock = threading.Lock()
        self._closed = False
        self._get()
        _streams.add(self)

    @classmethod
    def default(cls, flags: int = 0) -> "Stream":
        """The default (NULL) stream."""
        return cls(None, flags, _create=False)

    def _get(self) -> int:
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
        return self._ptr  # type: ignore[return-value]

    @property
    def handle(self) -> int:
        """The opends_stream_t as an int (0 for the default stream)."""
        return self._get()

    def _enqueue(self, opcode: str, file, buf, size, file_offset, buf_offset) -> StreamOp:
        op_name = "stream_" + opcode
        write = opcode == "write"
        size = as_int(op_name, "size", size, allow_none=True)
        file_offset = as_int(op_name, "file_offset", file_offset)
        buf_offset = as_int(op_name, "buf_offset", buf_offset)
        ref = get_buffer(buf, not write)
        size = resolve(ref, size, buf_offset, op_name)
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

    def stream_read(
        self, file, buf: Any, size: Optional[int] = None, file_offset: int = 0, buf_offset: int = 0
    ) -> StreamOp:
        """Queue a read from file into buf on this stream (cuFileReadAsync's
        order); return a :class:`StreamOp`."""
        return self._enqueue("read", file, buf, size, file_offset, buf_offset)

    def stream_write(
        self, file, buf: Any, size: Optional[int] = None, file_offset: int = 0, buf_offset: int = 0
    ) -> StreamOp:
        """Queue a write of buf to file on this stream; return a
        :class:`StreamOp`."""
        return self._enqueue("write", file, buf, size, file_offset, buf_offset)

    def synchronize(self) -> None:
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

    def close(self) -> None:
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

    def __repr__(self) -> str:
        kind = "own" if self._owned else ("default" if not self._ext else "0x%x" % self._ext)
        return "<opends.Stream %s queued=%d%s>" % (kind, len(self._ops), " closed" if self._closed else "")
