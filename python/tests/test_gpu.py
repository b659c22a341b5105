"""GPU tests: CUDA memory through the binding (torch, CuPy) and
opends.safetensors against safetensors.torch. Skipped without CUDA.

The driver is reopened with OPENDS_ACCEL=auto (or $OPENDS_TEST_GPU_ACCEL)
and OPENDS_BACKEND from $OPENDS_TEST_GPU_BACKEND (default auto).
"""
import os

import pytest

import opends
from opends import safetensors as ost

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("CUDA is not available", allow_module_level=True)


@pytest.fixture(scope="module", autouse=True)
def gpu_driver():
    torch.cuda.init()
    torch.empty(1, device="cuda")  # the primary context exists before open
    saved = {k: os.environ.get(k) for k in ("OPENDS_BACKEND", "OPENDS_ACCEL")}
    opends.driver_close()
    os.environ["OPENDS_BACKEND"] = os.environ.get("OPENDS_TEST_GPU_BACKEND", "auto")
    os.environ["OPENDS_ACCEL"] = os.environ.get("OPENDS_TEST_GPU_ACCEL", "auto")
    opends.driver_open()
    yield opends.backend()
    opends.driver_close()
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


def _bytes(t):
    return t.reshape(-1).view(torch.uint8)


def test_torch_cuda_roundtrip(tmp_path):
    n = (8 << 20) + 4097
    src = torch.randint(0, 256, (n,), dtype=torch.uint8, device="cuda")
    p = str(tmp_path / "g.bin")
    with opends.File(p, "w+") as f:
        assert f.write(src) == n
        torch.cuda.synchronize()
        host = open(p, "rb").read()
        assert host == src.cpu().numpy().tobytes()
        dst = torch.zeros(n + 100, dtype=torch.uint8, device="cuda")
        assert f.read(dst, size=n - 13, file_offset=13, buf_offset=50) == n - 13
        assert torch.equal(dst[50 : 50 + n - 13], src[13:])
        assert not dst[:50].any() and not dst[50 + n - 13 :].any()
        # typed tensors, futures in flight, reverse wait
        x = torch.randn(1000, 257, device="cuda", dtype=torch.bfloat16)
        assert f.pwrite(x, file_offset=0, task_size=1 << 16).wait() == x.numel() * 2
        ys = [torch.empty_like(x) for _ in range(4)]
        futs = [f.pread(y, task_size=100_000) for y in ys]
        for fu in reversed(futs):
            assert fu.wait() == x.numel() * 2
        for y in ys:
            assert torch.equal(_bytes(y), _bytes(x))
        with pytest.raises(ValueError):
            f.read(dst[:2000].view(2, -1)[:, ::2])


def test_torch_stream(tmp_path):
    n = 3 << 20
    src = torch.randint(0, 256, (n,), dtype=torch.uint8, device="cuda")
    p = str(tmp_path / "s.bin")
    ts = torch.cuda.Stream()
    with opends.File(p, "w+") as f, opends.Stream(ts) as s:
        w = s.stream_write(f, src)
        dst = torch.empty_like(src)
        r = s.stream_read(f, dst)
        s.synchronize()
        assert w.result == n and r.result == n
    assert torch.equal(src, dst)


def test_cupy_roundtrip(tmp_path):
    cp = pytest.importorskip("cupy")
    p = str(tmp_path / "c.bin")
    for i in range(cp.cuda.runtime.getDeviceCount()):  # every cuda:N
        with cp.cuda.Device(i):
            a = cp.arange(1_000_003, dtype=cp.float32) * (i + 1)
            b = cp.zeros_like(a)
        assert opends.get_buffer(a, True).device_index == i
        with opends.File(p, "w+") as f:
            assert f.write(a) == a.nbytes
            assert f.read(b) == a.nbytes
        with cp.cuda.Device(i):
            assert bool((a == b).all()), i


def test_safetensors_cuda_matches_reference(tmp_path):
    st = pytest.importorskip("safetensors.torch")
    g = torch.Generator(device="cuda").manual_seed(0)
    tensors = {}
    total = 0
    i = 0
    dtypes = [torch.bfloat16, torch.float16, torch.float32, torch.int8, torch.int64, torch.bool]
    while total < (1 << 30) + (200 << 20):  # ~1.2 GiB, many tensors
        dt = dtypes[i % len(dtypes)]
        shape = (1 + (i * 37) % 1500, 1 + (i * 101) % 4099) if i % 7 else (1 + i % 13,)
        if dt.is_floating_point:
            t = torch.randn(shape, generator=g, device="cuda").to(dt)
        else:
            t = torch.randint(0, 2 if dt == torch.bool else 127, shape, generator=g, device="cuda").to(dt)
        tensors["layer%04d.w" % i] = t
        total += t.numel() * t.element_size()
        i += 1
    tensors["scalar"] = torch.tensor(3.5, device="cuda")
    tensors["empty"] = torch.empty(0, 5, device="cuda", dtype=torch.float16)
    p = str(tmp_path / "big.safetensors")
    st.save_file({k: v.cpu() for k, v in tensors.items()}, p)
    del tensors
    ref = st.load_file(p, device="cuda:0")
    out = ost.load_file(p, device="cuda:0")
    torch.cuda.synchronize()
    assert set(out) == set(ref)
    for k in ref:
        a, b = ref[k], out[k]
        assert a.dtype == b.dtype and a.shape == b.shape and b.device == a.device, k
        assert torch.equal(_bytes(a.contiguous()), _bytes(b.contiguous())), k
    # every non-empty tensor a view of the one device buffer: no per-tensor
    # copy or device call (safetensors writes them aligned, largest items first)
    assert len({v.untyped_storage().data_ptr() for v in out.values() if v.numel()}) == 1


def test_buffer_device_index():
    """A tensor on any cuda:N says which device it is on (for several GPUs)."""
    for i in range(torch.cuda.device_count()):
        t = torch.empty(10, device="cuda:%d" % i)
        ref = opends.get_buffer(t, True)
        assert ref.device and ref.device_index == i and ref.ptr == t.data_ptr()
    assert opends.get_buffer(torch.empty(3), True).device_index is None


def test_torch_every_device_roundtrip(tmp_path):
    """Tensors on any cuda:N: the library finds the device from the pointer."""
    n = (2 << 20) + 77
    p = str(tmp_path / "d.bin")
    for i in range(torch.cuda.device_count()):
        src = torch.randint(0, 256, (n,), dtype=torch.uint8, device="cuda:%d" % i)
        with opends.File(p, "w+") as f:
            assert f.write(src) == n
            dst = torch.zeros(n, dtype=torch.uint8, device="cuda:%d" % i)
            assert f.pread(dst, n, 0, 1 << 20).result() == n
        assert torch.equal(src, dst), i
        assert open(p, "rb").read() == src.cpu().numpy().tobytes()


def _two_gpus():
    if torch.cuda.device_count() < 2:
        pytest.skip("needs two GPUs")


def test_read_fanout_two_gpus(tmp_path):
    _two_gpus()
    n = (64 << 20) + 4097
    data = torch.randint(0, 256, (n,), dtype=torch.uint8)
    p = tmp_path / "f.bin"
    p.write_bytes(data.numpy().tobytes())
    a = torch.zeros(n + 10, dtype=torch.uint8, device="cuda:0")
    b = torch.zeros(n + 10, dtype=torch.uint8, device="cuda:1")
    with opends.File(str(p)) as f:
        assert f.read_fanout([a, b], n - 5, 5, buf_offsets=[3, 10]) == n - 5
    assert torch.equal(a[3 : n - 2].cpu(), data[5:]) and torch.equal(b[10 : n + 5].cpu(), data[5:])
    assert not a[:3].any() and not a[n - 2 :].any() and not b[:10].any() and not b[n + 5 :].any()


def test_safetensors_two_gpus(tmp_path):
    _two_gpus()
    st = pytest.importorskip("safetensors.torch")
    g = torch.Generator().manual_seed(1)
    tensors = {"w%03d" % i: torch.randn((i % 50 + 1, 129), generator=g).to([torch.bfloat16, torch.float32][i % 2])
               for i in range(500)}  # fmt: skip
    p = str(tmp_path / "m.safetensors")
    st.save_file(tensors, p)
    outs = ost.load_file(p, device=["cuda:0", "cuda:1"])
    torch.cuda.synchronize()
    assert len(outs) == 2
    for i, out in enumerate(outs):
        ref = st.load_file(p, device="cuda:%d" % i)
        assert set(out) == set(ref)
        for k in ref:
            assert out[k].device == ref[k].device and out[k].dtype == ref[k].dtype and out[k].shape == ref[k].shape
            assert torch.equal(_bytes(out[k]), _bytes(ref[k])), (i, k)
