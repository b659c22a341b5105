"""Shared fixtures: run the CPU tests once per (backend, accel) pair.

OPENDS_TEST_BACKENDS (e.g. "ref:host,uring:hostdev") overrides the list.
Backends that cannot open on this machine or in this build are skipped.
"""
import os

import pytest

import opends

_DEFAULT = "ref:host,ref:hostdev,uring:host,uring:hostdev"
PAIRS = [tuple(p.split(":")) for p in os.environ.get("OPENDS_TEST_BACKENDS", _DEFAULT).split(",") if p]
_VARS = ("OPENDS_BACKEND", "OPENDS_ACCEL")


def _set_env(values):
    for k, v in values.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


@pytest.fixture(scope="module", params=PAIRS, ids=["%s-%s" % p for p in PAIRS])
def driver(request):
    """Close the driver, reopen it with OPENDS_BACKEND/OPENDS_ACCEL set to
    the parameter, yield (backend, accel); restore the environment after."""
    backend, accel = request.param
    saved = {k: os.environ.get(k) for k in _VARS}
    opends.driver_close()
    _set_env({"OPENDS_BACKEND": backend, "OPENDS_ACCEL": accel})
    try:
        opends.driver_open()
    except opends.Error as e:
        _set_env(saved)
        pytest.skip("backend %s / accel %s does not open here: %s" % (backend, accel, e))
    assert opends.backend() == backend
    yield backend, accel
    opends.driver_close()
    _set_env(saved)


@pytest.fixture
def pattern():
    """A function n -> deterministic bytes of length n."""
    import numpy as np

    def make(n, seed=1):
        return np.random.default_rng(seed).integers(0, 256, n, dtype=np.uint8)

    return make


@pytest.fixture
def make_datafile(tmp_path, pattern):
    """A function n -> (path, data): a file of n pattern bytes in tmp_path."""

    def make(n, name="d.bin", seed=1):
        data = pattern(n, seed)
        p = tmp_path / name
        p.write_bytes(data.tobytes())
        return str(p), data

    return make
