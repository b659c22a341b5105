"""Argument checks and small pieces shared by file.py, stream.py, batch.py
and registration.py."""

import operator
from typing import Any, Optional

from . import _lib
from ._lib import Error

_OFF_MAX = (1 << 63) - 1  # off_t and ssize_t on LP64 Linux


def invalid(detail: str) -> Error:
    """An OPENDS_INVALID_VALUE Error with this detail."""
    return Error(_lib.OPENDS_INVALID_VALUE, detail)


def as_int(op: str, name: str, value: Any, allow_none: bool = False) -> Optional[int]:
    """value as an int (anything with __index__), else TypeError naming the
    parameter; above what off_t holds, OPENDS_INVALID_VALUE. Negative values
    pass: the library rejects them with its own detail."""
    if value is None and allow_none:
        return None
    try:
        v = operator.index(value)
    except TypeError:
        raise TypeError("%s: %s must be an int, not %s" % (op, name, type(value).__name__)) from None
    if v > _OFF_MAX:
        raise invalid("%s: %s %d is larger than the largest file offset (2**63 - 1)" % (op, name, v))
    return v


def resolve(ref, size: Optional[int], buf_offset: int, op: str) -> int:
    """Check and return the byte count of an operation on ref."""
    if buf_offset < 0:
        # the library rejects it with its own detail; don't bounds-check
        return 0 if size is None else size
    if size is None:
        if buf_offset > ref.nbytes:
            raise invalid("%s: buf_offset %d is past the end of the %d-byte buffer" % (op, buf_offset, ref.nbytes))
        return ref.nbytes - buf_offset
    if size < 0:
        raise invalid("%s: size %d is negative" % (op, size))
    if buf_offset + size > ref.nbytes:
        raise invalid("%s: buf_offset %d + size %d exceeds the buffer's %d bytes" % (op, buf_offset, size, ref.nbytes))
    return size


def track(obj) -> None:
    """Keep obj (something with _drain()) until the driver closes."""
    with _lib._pending_lock:
        _lib.pending[id(obj)] = obj


def untrack(obj) -> None:
    with _lib._pending_lock:
        _lib.pending.pop(id(obj), None)


class Closing:
    """Context manager and finaliser for objects with close()."""

    def close(self) -> None:  # pragma: no cover (overridden)
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass
