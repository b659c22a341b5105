"""Sources opened by URL (opends_handle_open_url): File("rados://...") and
the safetensors loader on a URL. Without a cluster: the errors (malformed
URL, librados missing, modes a URL cannot take). With one
(OPENDS_TEST_CEPH_CONF names its ceph.conf, pool "opends", as .ci/run and
tests/sources/ceph-cluster.sh set up): data written and read back byte for
byte, and a safetensors file loaded from an object equal to the local one.
"""
import os
import subprocess
import sys
import uuid

import pytest

import opends
from opends import safetensors as ost

np = pytest.importorskip("numpy")

CONF = os.environ.get("OPENDS_TEST_CEPH_CONF")
ceph = pytest.mark.skipif(not CONF, reason="no Ceph cluster (OPENDS_TEST_CEPH_CONF unset)")


def test_is_url():
    from opends.file import is_url

    assert is_url("rados://pool/obj") and is_url(b"rados://p/o?conf=/x")
    assert not is_url("/tmp/a://b") and not is_url("dir/x://y") and not is_url("plain") and not is_url("://x")


def test_malformed_url_names_the_problem():
    with pytest.raises(opends.Error) as ei:
        opends.File("rados://pool")
    assert ei.value.code == opends.OPENDS_INVALID_VALUE and "rados://POOL/OBJECT" in ei.value.detail
    with pytest.raises(opends.Error) as ei:
        opends.File("nosuch://a/b")
    assert ei.value.code == opends.OPENDS_INVALID_VALUE


def test_modes_a_url_cannot_take():
    for mode in ("w", "a", "x", "w+"):
        with pytest.raises(ValueError, match="mode 'r' or 'r\\+'"):
            opends.File("rados://pool/obj", mode)
    with pytest.raises(ValueError, match="direct"):
        opends.File("rados://pool/obj", "r", direct=True)
    with pytest.raises(ValueError, match="invalid mode"):
        opends.File("rados://pool/obj", "q")


def test_librados_missing_is_platform_not_supported():
    """In a fresh process: librados is loaded once per process."""
    code = (
        "import opends, sys\n"
        "try:\n"
        "    opends.File('rados://pool/obj')\n"
        "except opends.Error as e:\n"
        "    print(e.name); print(e.detail)\n"
        "    sys.exit(0)\n"
        "sys.exit(3)\n"
        "\n"
    )
    env = dict(os.environ, OPENDS_RADOS_LIBRARY="/nonexistent/librados.so.2")
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    name, detail = r.stdout.splitlines()[:2]
    assert name == "OPENDS_PLATFORM_NOT_SUPPORTED" and "librados" in detail


def _url(oid):
    return "rados://opends/%s?conf=%s&op_timeout=60" % (oid, CONF)


@ceph
def test_rados_object_roundtrip(pattern):
    n = (5 << 20) + 333
    data = pattern(n, seed=11)
    url = _url("py-%s" % uuid.uuid4().hex)
    with opends.File(url, "r+") as f:
        assert f.write(data) == n
        with pytest.raises(Exception):
            f.fileno()
        got = np.zeros(n + 10, np.uint8)
        assert f.read(got, n - 7, 7, buf_offset=3) == n - 7
        assert got[3 : n - 4].tobytes() == data[7:].tobytes()
        assert f.pread(got, n, 0).result() == n and got[:n].tobytes() == data.tobytes()
        assert f.read(got, 100, n) == 0  # at the end: 0
    with opends.File(_url("py-missing-%s" % uuid.uuid4().hex)) as f:
        with pytest.raises(opends.Error) as ei:
            f.read(np.zeros(10, np.uint8))
        assert ei.value.code == 2  # ENOENT on the first read


@ceph
def test_safetensors_from_a_rados_object(tmp_path):
    stn = pytest.importorskip("safetensors.numpy")
    rng = np.random.default_rng(5)
    tensors = {"w%02d" % i: rng.standard_normal((i + 1, 7)).astype([np.float32, np.float16][i % 2]) for i in range(40)}
    tensors["empty"] = np.zeros((0, 3), np.int8)
    p = tmp_path / "m.safetensors"
    stn.save_file(tensors, str(p))
    url = _url("py-st-%s" % uuid.uuid4().hex)
    raw = np.frombuffer(p.read_bytes(), np.uint8)
    with opends.File(url, "r+") as f:
        assert f.write(raw) == raw.size
    ref = stn.load_file(str(p))
    for copy in (False, True):
        got = ost.load_file(url, framework="numpy", copy=copy)
        assert sorted(got) == sorted(ref)
        for k, v in ref.items():
            assert got[k].dtype == v.dtype and got[k].shape == v.shape and got[k].tobytes() == v.tobytes(), k
    with ost.safe_open(url, framework="np") as sf:  # lazy, and a subset
        assert sf.keys() == sorted(ref)
        assert sf.get_tensor("w03").tobytes() == ref["w03"].tobytes()
    sub = ost.load_file(url, framework="numpy", keys=["w01", "w39"])
    assert sorted(sub) == ["w01", "w39"] and sub["w39"].tobytes() == ref["w39"].tobytes()
    # an object cut short: the missing tensor bytes are an error, not zeros
    short = _url("py-st-short-%s" % uuid.uuid4().hex)
    with opends.File(short, "r+") as f:
        assert f.write(raw[:-100]) == raw.size - 100
    with pytest.raises(ost.HeaderError, match="truncated"):
        ost.load_file(short, framework="numpy")
