"""The package and the library it loads belong together: one version in
every source, the version checked at load, and (for an installed wheel,
OPENDS_EXPECT_PACKAGED=1 in python/ci-wheel.sh) the wheel's own copy."""
import os
import re

import pytest

import opends
from opends import _lib

REPO = os.path.join(os.path.dirname(__file__), "..", "..")


def _read(rel):
    p = os.path.join(REPO, rel)
    if not os.path.exists(p):
        pytest.skip("%s is not beside the tests" % rel)
    with open(p) as f:
        return f.read()


def test_versions_agree():
    top = re.search(r"version\s*:\s*'([^']+)'", _read("meson.build")).group(1)
    py = re.search(r"version\s*:\s*'([^']+)'", _read("python/meson.build")).group(1)
    assert top == py == opends.__version__
    assert opends.library_version() == tuple(int(x) for x in top.split("."))


def test_loaded_copy():
    if os.environ.get("OPENDS_EXPECT_PACKAGED") == "1":
        pkg = os.path.dirname(os.path.abspath(opends.__file__))
        assert os.path.dirname(os.path.abspath(opends.LIBRARY_PATH)) == pkg
        assert os.path.exists(os.path.join(pkg, "py.typed"))
    else:
        assert os.path.exists(opends.LIBRARY_PATH)


def test_version_mismatch_is_refused(monkeypatch, tmp_path):
    """A library of another version is skipped with a message naming both."""
    monkeypatch.setattr(_lib, "__version__", "9.9.9")
    monkeypatch.setattr(_lib, "_candidates", lambda: iter([("OPENDS_LIBRARY", opends.LIBRARY_PATH)]))
    with pytest.raises(ImportError, match=r"is libopends 0\.1\.0; this package needs 9\.9\.9"):
        _lib._load()


def test_license_metadata():
    text = _read("python/pyproject.toml")
    assert re.search(r'^license = "MIT"$', text, re.M)
    assert "MIT License" in _read("LICENSE")
    assert "license : 'MIT'" in _read("meson.build")


def test_wheel_carries_every_module():
    """python/meson.build installs each file of the package by name: one
    left out is missing from the wheel (ImportError only when installed)."""
    listed = set(re.findall(r"'opends/([^']+)'", _read("python/meson.build")))
    here = os.path.join(REPO, "python", "opends")
    files = {f for f in os.listdir(here) if f.endswith((".py", ".typed"))}
    assert files - listed == set(), "python/meson.build does not install %s" % sorted(files - listed)
    if os.environ.get("OPENDS_EXPECT_PACKAGED") == "1":  # and the installed copy has them
        inst = os.path.dirname(opends.__file__)
        assert {f for f in files if not os.path.exists(os.path.join(inst, f))} == set()
