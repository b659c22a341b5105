"""The error codes Python knows are the library's one list: OPENDS_ERROR_LIST
and OPENDS_ERRNO_MAX of the public headers (opends.h and its family headers
under include/opends/), as the loaded library names them."""
import errno
import glob
import os
import re

import pytest

import opends
from opends import _lib

INCLUDE = os.path.join(os.path.dirname(__file__), "..", "..", "include")


def _header():
    """opends.h and every family header it includes, as one text."""
    top = os.path.join(INCLUDE, "opends.h")
    if not os.path.exists(top):
        pytest.skip("no include/opends.h beside the tests")
    text = ""
    for p in [top] + sorted(glob.glob(os.path.join(INCLUDE, "opends", "*.h"))):
        with open(p) as f:
            text += f.read()
    return text


def test_codes_match_header():
    text = _header()
    listed = {int(v): "OPENDS_" + n for n, v in re.findall(r"X\((\w+), (\d+), \"", text)}
    assert len(listed) > 30
    assert opends._CODES == listed
    for code, name in listed.items():
        assert getattr(opends, name) == code


def test_errno_max_matches_header():
    m = re.search(r"#define OPENDS_ERRNO_MAX (\d+)", _header())
    assert m and int(m.group(1)) == opends.OPENDS_ERRNO_MAX == _lib.ERRNO_MAX
    assert all(c == 0 or c > opends.OPENDS_ERRNO_MAX for c in opends._CODES)


def test_code_names():
    assert opends.code_name(5022) == "OPENDS_INVALID_VALUE"
    assert opends.code_name(-5022) == "OPENDS_INVALID_VALUE"
    assert opends.code_name(errno.EIO) == "EIO"
    assert opends.code_name(5021) == "UNKNOWN_5021"
    e = opends.Error(errno.EBADF, "x")
    assert e.errno == errno.EBADF and e.name == "EBADF"
    e = opends.Error(opends.OPENDS_INVALID_VALUE, "y")
    assert e.errno is None and e.code == 5022


def _src(rel):
    p = os.path.join(os.path.dirname(__file__), "..", "..", rel)
    if not os.path.exists(p):
        pytest.skip("%s is not beside the tests" % rel)
    with open(p) as f:
        return f.read()


def test_configuration_variables_listed_everywhere():
    """Every variable the config parser reads (src/core/config.c's table) is
    in the header, the README, opends.config, opends-info and opends(3)."""
    parsed = set(re.findall(r'\{ "(OPENDS_[A-Z_]+)", "', _src("src/core/config.c")))
    assert {"OPENDS_BACKEND", "OPENDS_IO_THREADS", "OPENDS_CUFILE_LIBRARY"} <= parsed
    from opends.config import SETTINGS

    places = {
        "include/opends.h and include/opends/*.h": _header(),
        "README.md": _src("README.md"),
        "tools/opends-info.c": _src("tools/opends-info.c"),
        "packaging/man/opends.3": _src("packaging/man/opends.3"),
        "opends.config.SETTINGS": " ".join(SETTINGS.values()),
    }
    for where, text in places.items():
        missing = sorted(v for v in parsed if v not in text)
        assert not missing, "%s does not list %s" % (where, missing)
