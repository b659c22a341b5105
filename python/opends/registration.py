"""Buffer registration (opends_buf_register): an optimisation, never
required."""

import threading
from typing import Any, Dict, Tuple

from . import _lib
from ._buffer import get_buffer
from ._lib import check, lib

__all__ = ["buf_register", "buf_deregister", "registered"]

_regs: Dict[int, Tuple[Any, int]] = {}
_regs_lock = threading.Lock()


def buf_register(buf: Any) -> Any:
    """Register buf's memory (opends_buf_register). Returns buf. The buffer
    is kept alive until :func:`buf_deregister`."""
    ref = get_buffer(buf, False)
    gen = _lib.ensure_open()
    check(lib.opends_buf_register(ref.ptr, ref.nbytes, 0))
    with _regs_lock:
        _regs[ref.ptr] = (ref, gen)
    return buf


def buf_deregister(buf: Any) -> None:
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

    def __init__(self, buf: Any):
        self.buf = buf

    def __enter__(self) -> Any:
        buf_register(self.buf)
        return self.buf

    def __exit__(self, *exc) -> None:
        buf_deregister(self.buf)
