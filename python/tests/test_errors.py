"""The error codes Python knows are the library's one list: opends.h's
OPENDS_ERROR_LIST and OPENDS_ERRNO_MAX, as the loaded library names them."""
import errno
import os
import re

import pytest

import opends
from opends import _lib

HEADER = os.path.join(os.path.dirname(__file__), "..", "..", "include", "opends.h")


def _header():
    if not os.path.exists(HEADER):
        pytest.skip("no include/opends.h beside the tests")
    with open(HEADER) as f:
        return f.read()


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
