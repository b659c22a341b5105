"""opends.config: change the driver's configuration from Python, like
``kvikio.defaults.set``. The settings are the OPENDS_* environment
variables that opends_driver_open reads (see opends.h / README;
python/tests/test_errors.py checks this list against src/core/config.c)."""

import os
from typing import Any, Mapping, Optional

from . import _lib

__all__ = ["config", "SETTINGS"]

#: Setting name -> environment variable.
SETTINGS = {
    "backend": "OPENDS_BACKEND",
    "accel": "OPENDS_ACCEL",
    "io_threads": "OPENDS_IO_THREADS",
    "queue_depth": "OPENDS_QUEUE_DEPTH",
    "io_kworkers": "OPENDS_IO_KWORKERS",
    "chunk_size": "OPENDS_CHUNK_SIZE",
    "max_pinned": "OPENDS_MAX_PINNED",
    "inline_max": "OPENDS_INLINE_MAX",
    "readahead": "OPENDS_READAHEAD",
    "cpu_mask": "OPENDS_CPU_MASK",
    "idle_spin": "OPENDS_IDLE_SPIN",
    "assume_aligned_only": "OPENDS_ASSUME_ALIGNED_ONLY",
    "cufile_library": "OPENDS_CUFILE_LIBRARY",
    "rados_library": "OPENDS_RADOS_LIBRARY",
}


def _text(name: str, value: Any) -> Optional[str]:
    if value is None:
        return None
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, (str, os.PathLike)):
        return os.fspath(value)
    raise TypeError("config: %s must be a str, an int, a bool or None, not %s" % (name, type(value).__name__))


def _set_env(values: Mapping[str, Optional[str]]) -> None:
    for var, v in values.items():
        if v is None:
            os.environ.pop(var, None)
        else:
            os.environ[var] = v


class config:
    """``opends.config(io_threads=8, backend="uring")`` sets the settings
    (None unsets one: the library's default) and reopens the driver with
    them at once, so an invalid value raises :class:`opends.Error` here
    (naming the variable) and changes nothing. Used as a context manager, it
    puts the previous values back on exit and closes the driver, which the
    next use reopens with them.

    Reopening waits for Futures in flight; open :class:`File` objects
    re-register themselves, while Streams and Batches made before are gone
    (as with :func:`opends.driver_close`). The settings are the process's
    OPENDS_* environment variables, shared with C code in the process.
    ``config.get()`` returns every setting ({name: str or None}),
    ``config.get(name)`` one.
    """

    def __init__(self, settings: Optional[Mapping[str, Any]] = None, **kwargs: Any):
        merged = dict(settings or {})
        merged.update(kwargs)
        for name in merged:
            if name not in SETTINGS:
                raise TypeError("config: unknown setting %r (known: %s)" % (name, ", ".join(SETTINGS)))
        new = {SETTINGS[n]: _text(n, v) for n, v in merged.items()}
        self._saved = {var: os.environ.get(var) for var in new}
        _lib.driver_close()
        _set_env(new)
        try:
            _lib.driver_open()
        except BaseException:
            _set_env(self._saved)
            raise

    def __enter__(self) -> "config":
        return self

    def __exit__(self, *exc: Any) -> None:
        _lib.driver_close()
        _set_env(self._saved)

    @staticmethod
    def get(name: Optional[str] = None) -> Any:
        """The current value of one setting, or all of them as a dict."""
        if name is None:
            return {n: os.environ.get(v) or None for n, v in SETTINGS.items()}
        if name not in SETTINGS:
            raise TypeError("config.get: unknown setting %r (known: %s)" % (name, ", ".join(SETTINGS)))
        return os.environ.get(SETTINGS[name]) or None

    def __repr__(self) -> str:
        return "opends.config(%s)" % ", ".join("%s=%r" % kv for kv in self.get().items() if kv[1] is not None)
