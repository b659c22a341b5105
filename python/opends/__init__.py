"""OpenDS for Python: move file data into host or GPU memory.

A ctypes binding of libopends. The library loaded is the package's own copy
(a wheel carries one: ``opends/libopends.so.0``), else $OPENDS_LIBRARY, else
a checkout's build tree (``<repo>/build/src/libopends.so``), else the
system's ``libopends.so.0``; it must be the package's version.
:data:`LIBRARY_PATH` says which one was loaded.

Quick start::

    import numpy as np, opends
    buf = np.empty(1 << 20, np.uint8)
    with opends.File("data.bin") as f:
        n = f.read(buf)                       # blocking
        fut = f.pread(buf, file_offset=4096)  # a concurrent.futures.Future
        n = fut.result()

Buffers: torch tensors (CPU or CUDA), objects with ``__cuda_array_interface__``
(CuPy ...), ``__array_interface__`` (NumPy) or ``__dlpack__`` (JAX, ...), and
buffer-protocol objects (bytearray, memoryview, mmap); they must be
C-contiguous.

The driver opens on first use (configured by the OPENDS_* environment
variables, read at open) and closes at interpreter exit.
:func:`driver_open` takes settings over the environment
(opends_driver_open_with), :func:`config` reopens with new ones (and, as a
context manager, puts them back), :func:`driver_setting` says which value
is in effect and where it came from. Failures raise :class:`Error` (an OSError) carrying
``code``, ``name`` and ``detail``; wrong argument types raise TypeError
naming the parameter. No signal handler is installed unless
:func:`install_signal_handlers` is called.
"""

from . import _lib
from ._buffer import BufferRef, get_buffer
from ._lib import (
    LIBRARY_PATH,
    Error,
    backend,
    code_name,
    driver_close,
    driver_open,
    driver_setting,
    install_signal_handlers,
    is_open,
    properties,
    shutdown,
    status_string,
)
from .batch import READ, WRITE, Batch, BatchEvent, BatchOp
from .config import config
from .file import DEFAULT_TASK_SIZE, File, Future, describe
from .registration import buf_deregister, buf_register, registered
from .stream import Stream, StreamOp
from ._lib import CODES as _CODES
from ._lib import ERRNO_MAX as OPENDS_ERRNO_MAX

from ._version import __version__

# OPENDS_SUCCESS, OPENDS_INVALID_VALUE, ... as module constants
for _c, _n in _CODES.items():
    globals()[_n] = _c
del _c, _n

#: Stream flags (opends_stream_register).
OPENDS_STREAM_FIXED_BUF_OFFSET = 1
OPENDS_STREAM_FIXED_FILE_OFFSET = 2
OPENDS_STREAM_FIXED_FILE_SIZE = 4
OPENDS_STREAM_PAGE_ALIGNED_INPUTS = 8

#: File.advise values (opends_handle_advise).
OPENDS_ADVICE_NORMAL, OPENDS_ADVICE_SEQUENTIAL, OPENDS_ADVICE_RANDOM = 0, 1, 2

#: Batch statuses (opends_status_t).
OPENDS_WAITING, OPENDS_PENDING, OPENDS_INVALID = 0x1, 0x2, 0x4
OPENDS_CANCELED, OPENDS_COMPLETE, OPENDS_TIMEOUT, OPENDS_FAILED = 0x8, 0x10, 0x20, 0x40


def library_version():
    """The C library's version, (major, minor, patch)."""
    return _lib.version()


def _cleanup():
    """Close the driver if open; safe to call at any time, never raises
    (for frameworks that shut down without atexit)."""
    _lib.shutdown()


__all__ = [
    "Batch",
    "BatchEvent",
    "BatchOp",
    "BufferRef",
    "DEFAULT_TASK_SIZE",
    "Error",
    "File",
    "Future",
    "LIBRARY_PATH",
    "READ",
    "Stream",
    "StreamOp",
    "WRITE",
    "backend",
    "buf_deregister",
    "buf_register",
    "code_name",
    "config",
    "describe",
    "driver_close",
    "driver_open",
    "driver_setting",
    "get_buffer",
    "install_signal_handlers",
    "is_open",
    "library_version",
    "properties",
    "registered",
    "shutdown",
    "status_string",
]

# public names show as opends.X, not as the private module they live in
for _n in __all__:
    _o = globals()[_n]
    if isinstance(_o, type) and _o.__module__.startswith("opends."):
        _o.__module__ = "opends"
del _n, _o
