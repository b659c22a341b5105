"""opends.config: change the driver's configuration from Python, like
``kvikio.defaults.set``. The settings are those of opends_driver_open_with
(the OPENDS_* variables of include/opends/driver.h; python/tests/
test_errors.py checks this list against src/core/config.c)."""

import os
from typing import Any, Dict, Mapping, Optional, Tuple

from . import _lib

__all__ = ["config", "SETTINGS"]

#: Setting name -> environment variable.
SETTINGS = _lib.SETTINGS


class config:
    """``opends.config(io_threads=8, backend="uring")`` reopens the driver
    at once with these settings over the environment
    (opends_driver_open_with; the process's environment is not changed), so
    an invalid value raises :class:`opends.Error` here
    (OPENDS_INVALID_VALUE, the detail naming the variable) and changes
    nothing. None drops a setting given before (the environment's value,
    else the library's default, then holds). Settings given before and not
    named stay. Used as a context manager, it puts the settings before back
    on exit and closes the driver, which the next use reopens with them.

    ``cufile_library`` and ``rados_library`` are read from the environment
    only (where those libraries load): they are set as the process's
    OPENDS_CUFILE_LIBRARY / OPENDS_RADOS_LIBRARY (and put back on exit).

    Reopening waits for Futures in flight; open :class:`File` objects
    re-register themselves, while Streams and Batches made before are gone
    (as with :func:`opends.driver_close`). ``config.get()`` returns every
    setting ({name: str or None}), ``config.get(name)`` one: the value in
    effect (None: the library's default); :func:`opends.driver_setting`
    also says where it came from.
    """

    def __init__(self, settings: Optional[Mapping[str, Any]] = None, **kwargs: Any):
        merged = dict(settings or {})
        merged.update(kwargs)
        new: Dict[str, Optional[str]] = {}
        for name, value in merged.items():
            if name not in SETTINGS:
                raise TypeError("config: unknown setting %r (known: %s)" % (name, ", ".join(SETTINGS)))
            new[SETTINGS[name]] = _lib.setting_text("config", name, value)
        self._saved: Tuple[Dict[str, str], Dict[str, Optional[str]]] = (
            dict(_lib.explicit),
            {var: os.environ.get(var) for var in new if var in _lib.ENV_ONLY},
        )
        _lib.driver_close()
        for var, text in new.items():
            target: Any = os.environ if var in _lib.ENV_ONLY else _lib.explicit
            if text is None:
                target.pop(var, None)
            else:
                target[var] = text
        try:
            _lib.driver_open()
        except BaseException:
            self._restore()
            raise

    def _restore(self) -> None:
        explicit, env = self._saved
        _lib.explicit.clear()
        _lib.explicit.update(explicit)
        for var, v in env.items():
            if v is None:
                os.environ.pop(var, None)
            else:
                os.environ[var] = v

    def __enter__(self) -> "config":
        return self

    def __exit__(self, *exc: Any) -> None:
        try:
            _lib.driver_close()
        finally:  # a refused or failed close still puts the settings back
            self._restore()

    @staticmethod
    def get(name: Optional[str] = None) -> Any:
        """The value in effect of one setting (None: the library's
        default), or all of them as a dict. While the driver is open, the
        driver's (opends_driver_get_setting); while closed, what the next
        open would use."""
        if name is None:
            return {n: config.get(n) for n in SETTINGS}
        if name not in SETTINGS:
            raise TypeError("config.get: unknown setting %r (known: %s)" % (name, ", ".join(SETTINGS)))
        var = SETTINGS[name]
        if _lib.is_open() and var not in _lib.ENV_ONLY:
            return _lib.driver_setting(var)[0]
        return _lib.explicit.get(var) or os.environ.get(var) or None

    def __repr__(self) -> str:
        return "opends.config(%s)" % ", ".join("%s=%r" % kv for kv in self.get().items() if kv[1] is not None)
