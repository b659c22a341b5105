"""cuFile-style batch I/O: Batch, BatchOp, BatchEvent."""

import ctypes
import threading
from typing import Any, Dict, Iterable, List, Optional

from . import _lib
from ._buffer import get_buffer
from ._lib import Error, check, lib
from ._util import Closing, as_int, invalid, resolve

__all__ = ["Batch", "BatchOp", "BatchEvent", "READ", "WRITE"]

READ, WRITE = 0, 1
_STATUS = {1: "WAITING", 2: "PENDING", 4: "INVALID", 8: "CANCELED", 16: "COMPLETE", 32: "TIMEOUT", 64: "FAILED"}


class BatchOp:
    """One entry of a batch: ``BatchOp(opcode, file, buf, size=None,
    file_offset=0, buf_offset=0, cookie=None)``; opcode is "read"/"write"
    (or READ/WRITE). Tuples and dicts with these fields are accepted by
    :meth:`Batch.submit` too."""

    __slots__ = ("opcode", "file", "buf", "size", "file_offset", "buf_offset", "cookie", "_ref")

    def __init__(
        self,
        opcode: Any,
        file: Any,
        buf: Any,
        size: Optional[int] = None,
        file_offset: int = 0,
        buf_offset: int = 0,
        cookie: Any = None,
    ):
        if opcode in ("read", READ):
            opcode = READ
        elif opcode in ("write", WRITE):
            opcode = WRITE
        else:
            raise ValueError("BatchOp: opcode must be 'read' or 'write', not %r" % (opcode,))
        self.opcode = opcode
        self.file = file
        self.buf = buf
        self.size = as_int("BatchOp", "size", size, allow_none=True)
        self.file_offset = as_int("BatchOp", "file_offset", file_offset)
        self.buf_offset = as_int("BatchOp", "buf_offset", buf_offset)
        self.cookie = cookie
        self._ref = None

    def __repr__(self) -> str:
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

    def __init__(self, op: BatchOp, status: int, ret: int):
        self.op, self.status, self.ret = op, status, ret

    @property
    def cookie(self) -> Any:
        return self.op.cookie

    @property
    def status_name(self) -> str:
        return _STATUS.get(self.status, "UNKNOWN")

    @property
    def ok(self) -> bool:
        return self.status == 0x10

    @property
    def error(self) -> Optional[Error]:
        if self.status == 0x40 and self.ret < 0:
            return Error(-self.ret, "batch entry failed")
        return None

    def __repr__(self) -> str:
        return "<BatchEvent %s ret=%d cookie=%r>" % (self.status_name, self.ret, self.cookie)


class Batch(Closing):
    """cuFile-style batch I/O: ``Batch(max_nr)`` holds up to max_nr entries
    in flight. :meth:`submit` a list of ops, collect with
    :meth:`get_status` / :meth:`wait`, :meth:`cancel`, :meth:`close` (also
    on context-manager exit). Buffers are kept alive until their completion
    is delivered."""

    def __init__(self, max_nr: int):
        self._closed = True
        self.max_nr = as_int("Batch", "max_nr", max_nr)
        self._gen = _lib.ensure_open()
        b = ctypes.c_void_p()
        check(lib.opends_batch_setup(ctypes.byref(b), self.max_nr))
        self._b = b.value
        self._inflight: Dict[int, BatchOp] = {}
        self._next = 1
        self._lock = threading.Lock()
        self._closed = False

    def _get(self) -> int:
        if self._closed:
            raise ValueError("operation on a closed opends.Batch")
        if self._gen != _lib.generation() or not _lib.is_open():
            raise invalid("the batch was destroyed when the driver closed")
        return self._b  # type: ignore[return-value]

    @property
    def in_flight(self) -> int:
        """Entries submitted and not yet delivered."""
        return len(self._inflight)

    def submit(self, ops: Iterable[Any]) -> List[BatchOp]:
        """Submit ops (BatchOp, tuple or dict each) all or nothing; return
        the list of BatchOp objects."""
        b = self._get()
        ops = [
            o if isinstance(o, BatchOp) else (BatchOp(**o) if isinstance(o, dict) else BatchOp(*o)) for o in ops
        ]
        if not ops:
            raise invalid("Batch.submit: no operations")
        params = (_lib.opends_io_params_t * len(ops))()
        tokens = []
        with self._lock:
            for i, op in enumerate(ops):
                ref = get_buffer(op.buf, op.opcode == READ, "ops[%d].buf" % i)
                size = resolve(ref, op.size, op.buf_offset, "ops[%d]" % i)
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

    def get_status(
        self, min_nr: int = 0, max_nr: Optional[int] = None, timeout: Optional[float] = None
    ) -> List[BatchEvent]:
        """Collect up to max_nr (default: all in flight) completions,
        waiting for at least min_nr; timeout in seconds (None: no limit).
        Returns a list of :class:`BatchEvent`."""
        b = self._get()
        min_nr = as_int("Batch.get_status", "min_nr", min_nr)
        max_nr = as_int("Batch.get_status", "max_nr", max_nr, allow_none=True)
        n = max_nr if max_nr is not None else max(len(self._inflight), 1)
        events = (_lib.opends_io_events_t * n)()
        nr = ctypes.c_uint(n)
        ts = None
        if timeout is not None:
            ts = _lib.timespec(int(timeout), int((timeout - int(timeout)) * 1e9))
        check(lib.opends_batch_get_status(b, min_nr, ctypes.byref(nr), events, ctypes.byref(ts) if ts else None))
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

    def wait(self) -> List[BatchEvent]:
        """Collect every completion still undelivered."""
        out: List[BatchEvent] = []
        while self._inflight:
            n = len(self._inflight)
            out += self.get_status(min_nr=n, max_nr=n)
        return out

    def cancel(self) -> None:
        """Cancel entries not yet started (delivered as CANCELED)."""
        check(lib.opends_batch_cancel(self._get()))

    def close(self) -> None:
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

    def __repr__(self) -> str:
        return "<opends.Batch max_nr=%d in_flight=%d%s>" % (
            self.max_nr,
            len(self._inflight),
            " closed" if self._closed else "",
        )
