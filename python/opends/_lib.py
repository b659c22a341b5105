"""Loading libopends, its C prototypes, the error type and the driver's life.

Everything here is private; the public names are re-exported by
:mod:`opends`. The driver is opened lazily by :func:`ensure_open` (the first
I/O, registration or query opens it) and closed at interpreter exit (and
before the process dies of SIGTERM/SIGINT when install_signal_handlers() was
called).
"""

import atexit
import ctypes
import ctypes.util
import os
import signal
import threading

from typing import Any, Mapping, Optional, Tuple

from ._version import __version__

__all__ = []

def code_name(code):
    """Name of a code: 'OPENDS_...' for library codes, the errno name
    ('EBADF', ...) below OPENDS_ERRNO_MAX, else 'UNKNOWN_<code>'
    (opends_err_name, negated codes folded)."""
    name = lib.opends_err_name(int(code)).decode()
    return "UNKNOWN_%d" % abs(int(code)) if name == "UNKNOWN" else name


class Error(OSError):  # shown as opends.Error (see the end of __init__.py)
    """An OpenDS failure.

    Attributes:
        code: the positive code: an OpenDS code (5001..5047, e.g. 5022 for
            OPENDS_INVALID_VALUE) or an errno value (< ERRNO_MAX) that the
            operating system reported for the I/O itself.
        name: 'OPENDS_INVALID_VALUE', 'EBADF', ...
        detail: the library's sentence on the failure
            (opends_last_error_detail()), or one written by the binding.
        message: the library's string for the code (opends_op_status_error).
        backend_err: errno / accelerator result code reported alongside an
            OpenDS code (0 if none).
        errno: (OSError) the errno when there is one -- ``code`` for OS
            errors, ``backend_err`` for OpenDS codes that carry one -- else
            None. ``except OSError`` therefore catches OpenDS errors too.
    """

    def __init__(self, code, detail="", backend_err=0, message=None):
        code = abs(int(code))
        if message is None:
            message = status_string(code)
        if 0 < code < ERRNO_MAX:
            eno = code
        elif backend_err:
            eno = backend_err
        else:
            eno = None
        super().__init__(eno, message)
        self.code = code
        self.name = code_name(code)
        self.detail = detail or ""
        self.message = message
        self.backend_err = backend_err

    def __str__(self):
        s = "%s (%d): %s" % (self.name, self.code, self.message)
        if self.detail:
            s += ": " + self.detail
        return s

    def __repr__(self):
        return "opends.Error(%s, %r)" % (self.name, self.detail)

    def __reduce__(self):
        return (type(self), (self.code, self.detail, self.backend_err, self.message))


# ---------------------------------------------------------------------------
# The shared library
# ---------------------------------------------------------------------------

_HERE = os.path.dirname(os.path.abspath(__file__))


def _candidates():
    """(where, path) to try, in order: the package's own copy (a wheel
    carries one), $OPENDS_LIBRARY, a checkout's build tree
    (<repo>/python/opends -> <repo>/build/src), then the system's."""
    yield "the package's copy", os.path.join(_HERE, "libopends.so.0")
    env = os.environ.get("OPENDS_LIBRARY")
    if env:
        yield "OPENDS_LIBRARY", env
    tree = os.path.join(_HERE, "..", "..", "build", "src", "libopends.so")
    if os.path.exists(tree):
        yield "the build tree", os.path.normpath(tree)
    yield "the system's", ctypes.util.find_library("opends") or "libopends.so.0"


def _library_version(cdll):
    v = [ctypes.c_uint() for _ in range(3)]
    f = cdll.opends_get_version
    f.argtypes = [ctypes.POINTER(ctypes.c_uint)] * 3
    f(*(ctypes.byref(x) for x in v))
    return tuple(x.value for x in v)


def _load():
    """Load the first candidate that exists and whose version is this
    package's; RTLD_LOCAL so that its symbols never bind another copy."""
    want = tuple(int(x) for x in __version__.split(".")[:3])
    errors = []
    for where, path in _candidates():
        if os.sep in path and not os.path.exists(path):
            if where != "the package's copy":
                errors.append("%s %s: no such file" % (where, path))
            continue
        try:
            cdll = ctypes.CDLL(path, mode=os.RTLD_LOCAL)
        except OSError as e:
            errors.append("%s: %s" % (where, e))
            continue
        try:
            have = _library_version(cdll)
            cdll.opends_err_name  # noqa: B018 (0.1.0 libraries before it lack it)
        except AttributeError as e:
            errors.append("%s %s: not a libopends of this version (%s)" % (where, path, e))
            continue
        if have != want:
            errors.append(
                "%s %s is libopends %s; this package needs %s" % (where, path, ".".join(map(str, have)), __version__)
            )
            continue
        return cdll, path
    raise ImportError(
        "opends: no usable libopends (pip install opends carries one; from a checkout set OPENDS_LIBRARY "
        "to build/src/libopends.so); tried: " + "; ".join(errors)
    )


lib, LIBRARY_PATH = _load()

c_off_t = ctypes.c_int64  # off_t on LP64 Linux (and _FILE_OFFSET_BITS=64)
c_ssize_t = ctypes.c_ssize_t
c_size_t = ctypes.c_size_t
c_void_p = ctypes.c_void_p
c_uint = ctypes.c_uint
c_int = ctypes.c_int


class opends_setting_t(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("value", ctypes.c_char_p)]


class opends_error_t(ctypes.Structure):
    _fields_ = [("err", c_int), ("backend_err", c_int)]


class opends_drv_props_t(ctypes.Structure):
    _fields_ = [
        ("major_version", c_uint),
        ("minor_version", c_uint),
        ("max_direct_io_size", c_size_t),
        ("max_batch_io_size", c_uint),
        ("max_batch_io_timeout_msecs", c_uint),
        ("reserved", c_uint * 8),
    ]


class opends_async_future_t(ctypes.Structure):
    _fields_ = [("opaque", ctypes.c_uint64 * 8)]


class _batch_params(ctypes.Structure):
    _fields_ = [("buf_base", c_void_p), ("file_offset", c_off_t), ("buf_offset", c_off_t), ("size", c_size_t)]


class _io_params_u(ctypes.Union):
    _fields_ = [("batch", _batch_params)]


class opends_io_params_t(ctypes.Structure):
    _fields_ = [("mode", c_int), ("u", _io_params_u), ("fh", c_void_p), ("opcode", c_int), ("cookie", c_void_p)]


class opends_io_events_t(ctypes.Structure):
    _fields_ = [("cookie", c_void_p), ("status", c_int), ("ret", c_ssize_t)]


class timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


def _proto(name, restype, *argtypes):
    f = getattr(lib, name)
    f.restype = restype
    f.argtypes = list(argtypes)
    return f


E = opends_error_t
P = ctypes.POINTER
_proto("opends_op_status_error", ctypes.c_char_p, c_int)
_proto("opends_last_error_detail", ctypes.c_char_p)
_proto("opends_driver_open", E)
_proto("opends_driver_close", E)
_proto("opends_driver_open_with", E, P(opends_setting_t), c_size_t)
_proto("opends_driver_get_setting", E, ctypes.c_char_p, ctypes.c_char_p, c_size_t, P(c_int))
_proto("opends_handle_advise", E, c_void_p, c_int)
_proto("opends_driver_get_properties", E, P(opends_drv_props_t))
_proto("opends_get_version", E, P(c_uint), P(c_uint), P(c_uint))
_proto("opends_driver_backend", ctypes.c_char_p)
_proto("opends_handle_register", E, P(c_void_p), c_int)
_proto("opends_handle_deregister", E, c_void_p)
_proto("opends_buf_register", E, c_void_p, c_size_t, c_int)
_proto("opends_buf_deregister", E, c_void_p)
_proto("opends_sync_read", c_ssize_t, c_void_p, c_void_p, c_size_t, c_off_t, c_off_t)
_proto("opends_sync_write", c_ssize_t, c_void_p, c_void_p, c_size_t, c_off_t, c_off_t)
_proto("opends_sync_read_fanout", c_ssize_t, c_void_p, P(c_void_p), P(c_off_t), c_uint, c_size_t, c_off_t)
_proto("opends_handle_open_url", E, P(c_void_p), ctypes.c_char_p, c_int)
_proto("opends_device_count", E, P(c_uint))
_proto("opends_async_read", E, c_void_p, c_void_p, c_size_t, c_off_t, c_off_t, P(opends_async_future_t))
_proto("opends_async_write", E, c_void_p, c_void_p, c_size_t, c_off_t, c_off_t, P(opends_async_future_t))
_proto("opends_async_await", c_ssize_t, P(opends_async_future_t))
_proto("opends_async_poll", c_int, P(opends_async_future_t))
_proto("opends_stream_create", E, P(c_void_p))
_proto("opends_stream_destroy", E, c_void_p)
_proto("opends_stream_register", E, c_void_p, c_uint)
_proto("opends_stream_deregister", E, c_void_p)
for _n in ("opends_stream_read", "opends_stream_write"):
    _proto(_n, E, c_void_p, c_void_p, P(c_size_t), P(c_off_t), P(c_off_t), P(c_ssize_t), c_void_p)
_proto("opends_stream_synchronize", E, c_void_p)
_proto("opends_batch_setup", E, P(c_void_p), c_uint)
_proto("opends_batch_submit", E, c_void_p, c_uint, P(opends_io_params_t), c_uint)
_proto("opends_batch_get_status", E, c_void_p, c_uint, P(c_uint), P(opends_io_events_t), P(timespec))
_proto("opends_batch_cancel", E, c_void_p)
_proto("opends_batch_destroy", E, c_void_p)
_proto("opends_err_name", ctypes.c_char_p, c_int)
_proto("opends_describe", E, c_void_p, ctypes.c_char_p, c_size_t)
del _n

# ---------------------------------------------------------------------------
# Error codes, from the library's one list (OPENDS_ERROR_LIST in opends.h)
# ---------------------------------------------------------------------------

#: OPENDS_ERRNO_MAX of opends.h: codes below it are errno values, OpenDS's
#: own codes lie above it (python/tests/test_errors.py checks the header).
ERRNO_MAX = 5000
#: Span above ERRNO_MAX searched for OpenDS codes (cuFile's use 5001..5047).
_CODE_SPAN = 1000


def _codes():
    out = {0: lib.opends_err_name(0).decode()}
    for c in range(ERRNO_MAX + 1, ERRNO_MAX + _CODE_SPAN):
        name = lib.opends_err_name(c)
        if name != b"UNKNOWN":
            out[c] = name.decode()
    return out


#: Code -> name of every OpenDS error code (the values equal cuFile's).
CODES = _codes()

# Module-level constants OPENDS_INVALID_VALUE = 5022, ... (re-exported).
for _code, _name in CODES.items():
    globals()[_name] = _code
    __all__.append(_name)
del _code, _name


def status_string(code):
    """opends_op_status_error(code) as a str."""
    return lib.opends_op_status_error(int(code)).decode("utf-8", "replace")


def last_detail():
    """opends_last_error_detail() of the calling thread, as a str."""
    s = lib.opends_last_error_detail()
    return s.decode("utf-8", "replace") if s else ""


def check(res):
    """Raise Error for an opends_error_t that is not success."""
    if res.err != 0:
        raise Error(res.err, last_detail(), res.backend_err)


def check_ssize(ret):
    """Return ret (bytes) or raise Error for a negated code."""
    if ret < 0:
        raise Error(-ret, last_detail())
    return ret


def version():
    """The C library's version as (major, minor, patch); needs no open driver."""
    a, b, c = c_uint(), c_uint(), c_uint()
    lib.opends_get_version(ctypes.byref(a), ctypes.byref(b), ctypes.byref(c))
    return (a.value, b.value, c.value)


# ---------------------------------------------------------------------------
# Driver lifecycle
# ---------------------------------------------------------------------------

_lock = threading.Lock()
_state = {"open": False, "generation": 0}
# Futures (and other objects whose C memory the library may still write)
# that have been submitted but not collected: id -> object with _drain().
pending = {}
_pending_lock = threading.Lock()
# Callbacks run before the driver closes (streams syncing, batches).
_before_close = []


def generation():
    """A number that changes each time the driver is opened; objects holding
    library handles compare it to know whether their handle still exists."""
    return _state["generation"]


def is_open():
    """True while the driver is open."""
    return _state["open"]


def _cuda_ctx_guard():
    """Save the calling thread's current CUDA context if libcuda is already
    loaded in the process (never loads it); returns a restore function."""
    try:
        cu = ctypes.CDLL("libcuda.so.1", mode=os.RTLD_NOLOAD | os.RTLD_GLOBAL)
    except OSError:
        return lambda: None
    try:
        ctx = c_void_p()
        if cu.cuCtxGetCurrent(ctypes.byref(ctx)) != 0:
            return lambda: None
    except AttributeError:
        return lambda: None

    def restore():
        cur = c_void_p()
        if cu.cuCtxGetCurrent(ctypes.byref(cur)) == 0 and cur.value != ctx.value:
            cu.cuCtxSetCurrent(ctx)

    return restore


#: Setting name -> its OPENDS_* variable (include/opends/driver.h lists them;
#: python/tests/test_errors.py checks this list against src/core/config.c).
SETTINGS = {
    "backend": "OPENDS_BACKEND",
    "accel": "OPENDS_ACCEL",
    "io_threads": "OPENDS_IO_THREADS",
    "queue_depth": "OPENDS_QUEUE_DEPTH",
    "io_kworkers": "OPENDS_IO_KWORKERS",
    "chunk_size": "OPENDS_CHUNK_SIZE",
    "max_pinned": "OPENDS_MAX_PINNED",
    "inline_max": "OPENDS_INLINE_MAX",
    "inline_split": "OPENDS_INLINE_SPLIT",
    "readahead": "OPENDS_READAHEAD",
    "cpu_mask": "OPENDS_CPU_MASK",
    "idle_spin": "OPENDS_IDLE_SPIN",
    "assume_aligned_only": "OPENDS_ASSUME_ALIGNED_ONLY",
    "cufile_library": "OPENDS_CUFILE_LIBRARY",
    "rados_library": "OPENDS_RADOS_LIBRARY",
}

#: Read from the environment only (where those libraries load):
#: opends_driver_open_with refuses them.
ENV_ONLY = ("OPENDS_CUFILE_LIBRARY", "OPENDS_RADOS_LIBRARY")

#: The explicit settings ({variable: text}) every open of the driver uses,
#: over the environment (opends_driver_open_with): set by driver_open(settings)
#: and opends.config.
explicit = {}

_SOURCES = ("default", "environment", "explicit")


def variable(who, name):
    """The OPENDS_* variable of a setting given as "io_threads" or
    "OPENDS_IO_THREADS"; TypeError naming who's parameter otherwise."""
    if isinstance(name, str):
        if name in SETTINGS:
            return SETTINGS[name]
        if name in SETTINGS.values():
            return name
    raise TypeError("%s: unknown setting %r (known: %s)" % (who, name, ", ".join(SETTINGS)))


def setting_text(who, name, value):
    """A setting's value as the text the library parses (None: unset)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, (str, os.PathLike)):
        return os.fspath(value)
    raise TypeError("%s: %s must be a str, an int, a bool or None, not %s" % (who, name, type(value).__name__))


def _open_lib():
    if not explicit:
        return lib.opends_driver_open()
    items = list(explicit.items())
    arr = (opends_setting_t * len(items))(*[opends_setting_t(k.encode(), v.encode()) for k, v in items])
    return lib.opends_driver_open_with(arr, len(items))


def ensure_open():
    """Open the driver if it is not open (thread-safe), with the explicit
    settings over the environment; return the current generation."""
    if _state["open"]:
        return _state["generation"]
    with _lock:
        if not _state["open"]:
            restore = _cuda_ctx_guard()
            try:
                res = _open_lib()
            finally:
                restore()
            if res.err == OPENDS_DRIVER_ALREADY_OPEN:  # opened by C code in this process
                pass
            else:
                check(res)
            _state["generation"] += 1
            _state["open"] = True
    return _state["generation"]


def driver_open(settings: "Optional[Mapping[str, Any]]" = None) -> None:
    """Open the driver now (it is otherwise opened on first use), reading
    the OPENDS_* environment variables; raises Error on a bad configuration.
    Opening an open driver does nothing.

    settings: {name: value} opened with over the environment
    (opends_driver_open_with), names as in :class:`opends.config`
    ("io_threads") or as variables ("OPENDS_IO_THREADS"), values str, int
    or bool; they stay in force for every later open (None or {}: the
    environment alone again). With settings the driver must be closed
    (Error OPENDS_DRIVER_ALREADY_OPEN); an invalid one raises Error
    OPENDS_INVALID_VALUE naming the variable, nothing opened and the
    settings before kept. OPENDS_CUFILE_LIBRARY and OPENDS_RADOS_LIBRARY
    are read from the environment only (OPENDS_INVALID_VALUE here)."""
    if settings is None:
        ensure_open()
        return
    if not hasattr(settings, "items"):
        raise TypeError("driver_open: settings must be a mapping (dict) or None, not %s" % type(settings).__name__)
    new = {}
    for name, value in settings.items():
        var = variable("driver_open", name)
        text = setting_text("driver_open", name, value)
        if text is not None:
            new[var] = text
    with _lock:
        if _state["open"]:
            raise Error(OPENDS_DRIVER_ALREADY_OPEN, "driver_open: settings given while the driver is open: "
                        "close it first (opends.driver_close()) or use opends.config")  # fmt: skip
        saved = dict(explicit)
        explicit.clear()
        explicit.update(new)
    try:
        ensure_open()
    except BaseException:
        explicit.clear()
        explicit.update(saved)
        raise


def driver_setting(name: str) -> "Tuple[Optional[str], str]":
    """(value, source) of one setting of the open driver (opened if
    needed): the text in effect, None for the library's default, and where
    it came from: "explicit" (driver_open(settings) / opends.config),
    "environment" or "default" (opends_driver_get_setting)."""
    var = variable("driver_setting", name)
    ensure_open()
    buf = ctypes.create_string_buffer(4096)
    src = c_int()
    check(lib.opends_driver_get_setting(var.encode(), buf, len(buf), ctypes.byref(src)))
    return (buf.value.decode() or None, _SOURCES[src.value] if 0 <= src.value < 3 else str(src.value))


def _drain_pending():
    with _pending_lock:
        items = list(pending.values())
    for obj in items:
        try:
            obj._drain()
        except Exception:  # results are kept by the objects themselves
            pass
    for cb in list(_before_close):
        try:
            cb()
        except Exception:
            pass


def driver_close():
    """Close the driver: wait for every Future still in flight (their
    results stay readable), then opends_driver_close(). Files, registered
    buffers and streams made before stay usable: files re-register their
    descriptor on next use; library-made streams and batches are gone.
    Closing a closed driver does nothing. The next I/O opens it again."""
    with _lock:
        if not _state["open"]:
            return
        _drain_pending()
        _state["open"] = False
        _state["generation"] += 1
        res = lib.opends_driver_close()
    if res.err not in (OPENDS_SUCCESS, OPENDS_DRIVER_NOT_INITIALIZED):
        check(res)


def shutdown():
    """driver_close() that never raises; registered with atexit."""
    try:
        driver_close()
    except Exception:
        pass


atexit.register(shutdown)


def backend():
    """Name of the active backend ('ref', 'uring', 'gds', ...); opens the
    driver if needed."""
    ensure_open()
    s = lib.opends_driver_backend()
    return s.decode() if s else None


def properties():
    """The driver's properties as a dict (sizes in bytes)."""
    ensure_open()
    p = opends_drv_props_t()
    check(lib.opends_driver_get_properties(ctypes.byref(p)))
    return {
        "major_version": p.major_version,
        "minor_version": p.minor_version,
        "max_direct_io_size": p.max_direct_io_size,
        "max_batch_io_size": p.max_batch_io_size,
        "max_batch_io_timeout_msecs": p.max_batch_io_timeout_msecs,
    }


# ---------------------------------------------------------------------------
# Signals: close before the process dies of one
# ---------------------------------------------------------------------------

_previous = {}


def _on_signal(signum, frame):
    prev = _previous.get(signum, signal.SIG_DFL)
    if callable(prev):
        # A Python handler (default_int_handler raises KeyboardInterrupt):
        # chain to it. If it raises and nothing catches it the interpreter
        # exits and atexit closes the driver; if the program goes on, the
        # driver must stay open for it.
        return prev(signum, frame)
    if prev == signal.SIG_IGN:
        return None
    # SIG_DFL: the process is about to die without running atexit; close
    # the driver first (unless this thread is inside open/close), then die
    # of the same signal.
    if _lock.acquire(blocking=False):
        _lock.release()
        shutdown()
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)
    return None


def install_signal_handlers():
    """Close the driver before the process dies of SIGTERM (or of SIGINT
    left at its default), chaining to the handlers in place before. Not done
    unless asked: a library should not take process-wide signals (atexit
    closes the driver on a normal exit). Call from the main thread."""
    if _previous:
        return
    if threading.current_thread() is not threading.main_thread():
        raise RuntimeError("install_signal_handlers: call it from the main thread")
    for sig in (signal.SIGTERM, signal.SIGINT):
        try:
            prev = signal.getsignal(sig)
            if prev is None:  # installed from C; leave it alone
                continue
            signal.signal(sig, _on_signal)
            _previous[sig] = prev
        except (ValueError, OSError):
            pass
