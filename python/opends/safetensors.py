"""Load safetensors files with OpenDS.

:func:`load_file` reads a ``.safetensors`` file into ONE buffer on the
target device (a torch uint8 tensor, or a NumPy array when torch is not
installed or ``framework="numpy"``) with large reads all in flight at once,
and returns ``{name: tensor}`` where each tensor is a view into that buffer.
The result equals ``safetensors.torch.load_file(path, device=...)`` byte for
byte.

Format (as documented by the safetensors project): an 8-byte little-endian
header length N, N bytes of a UTF-8 JSON object mapping each tensor name to
``{"dtype", "shape", "data_offsets": [begin, end]}`` (offsets relative to
the data region, which starts at byte 8 + N), and an optional
``"__metadata__"`` entry of strings (ignored here; see :func:`read_header`).

Data types: BOOL, U8, I8, I16, U16, I32, U32, I64, U64, F16, BF16, F32, F64,
C64, and F8_E4M3 / F8_E5M2 where torch has them. Without torch (NumPy
results) BF16 is ``ml_dtypes.bfloat16`` when ml_dtypes is installed, else
the raw bits as ``uint16``; F8 types are ``ml_dtypes`` float8 types, else
``uint8``.

Validation: header length, JSON, dtypes, shapes against sizes, offsets in
range and not overlapping. Unlike the reference loader, gaps between
tensors and trailing bytes after the last one are accepted.

Alignment: a tensor whose offset in the data region is not a multiple of its
item size is copied into its own allocation instead of viewed.
"""

import json
import os
import struct

from . import file as _file

__all__ = ["load_file", "read_header", "HeaderError", "DTYPES", "DEFAULT_PIECE_SIZE"]

#: Bytes per read operation; all pieces are in flight at once.
DEFAULT_PIECE_SIZE = 64 << 20

#: Largest header accepted (the safetensors project's own limit).
MAX_HEADER_SIZE = 100 * 1000 * 1000

# name -> (item size, NumPy dtype string or None, torch dtype attribute)
DTYPES = {
    "BOOL": (1, "?", "bool"),
    "U8": (1, "u1", "uint8"),
    "I8": (1, "i1", "int8"),
    "I16": (2, "<i2", "int16"),
    "U16": (2, "<u2", "uint16"),
    "I32": (4, "<i4", "int32"),
    "U32": (4, "<u4", "uint32"),
    "I64": (8, "<i8", "int64"),
    "U64": (8, "<u8", "uint64"),
    "F16": (2, "<f2", "float16"),
    "BF16": (2, None, "bfloat16"),
    "F32": (4, "<f4", "float32"),
    "F64": (8, "<f8", "float64"),
    "C64": (8, "<c8", "complex64"),
    "F8_E4M3": (1, None, "float8_e4m3fn"),
    "F8_E5M2": (1, None, "float8_e5m2"),
}


class HeaderError(ValueError):
    """The file is not a valid safetensors file; the message names the
    file and the problem."""


class TensorInfo:
    """One header entry: ``name``, ``dtype`` (safetensors name), ``shape``
    (tuple), ``begin``/``end`` (offsets in the data region), ``itemsize``."""

    __slots__ = ("name", "dtype", "shape", "begin", "end", "itemsize")

    def __init__(self, name, dtype, shape, begin, end, itemsize):
        self.name, self.dtype, self.shape = name, dtype, shape
        self.begin, self.end, self.itemsize = begin, end, itemsize

    def __repr__(self):
        return "TensorInfo(%r, %s, %r, [%d, %d))" % (self.name, self.dtype, self.shape, self.begin, self.end)


def _parse(path, head, file_size):
    """Validate the header; return (data_start, {name: TensorInfo}, metadata)."""

    def bad(msg):
        return HeaderError("%s: %s" % (path, msg))

    if file_size < 8 or len(head) < 8:
        raise bad("file is %d bytes, shorter than the 8-byte header length" % file_size)
    (n,) = struct.unpack("<Q", head[:8])
    if n > MAX_HEADER_SIZE:
        raise bad("header length %d is above the %d-byte limit" % (n, MAX_HEADER_SIZE))
    if 8 + n > file_size:
        raise bad("header length %d runs past the end of the %d-byte file" % (n, file_size))
    raw = head[8 : 8 + n]
    try:
        hdr = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise bad("header is not valid UTF-8 JSON (%s)" % e) from None
    if not isinstance(hdr, dict):
        raise bad("header is a JSON %s, not an object" % type(hdr).__name__)
    data_len = file_size - 8 - n
    meta = hdr.pop("__metadata__", None)
    if meta is not None and not isinstance(meta, dict):
        raise bad("__metadata__ is not an object")
    infos = {}
    for name, e in hdr.items():
        if not isinstance(e, dict):
            raise bad("tensor %r: entry is not an object" % name)
        dt = e.get("dtype")
        if dt not in DTYPES:
            raise bad("tensor %r: unknown dtype %r" % (name, dt))
        shape = e.get("shape")
        if not isinstance(shape, list) or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape):
            raise bad("tensor %r: shape %r is not a list of non-negative integers" % (name, shape))
        offs = e.get("data_offsets")
        if (
            not isinstance(offs, list)
            or len(offs) != 2
            or not all(isinstance(o, int) and not isinstance(o, bool) and o >= 0 for o in offs)
        ):
            raise bad("tensor %r: data_offsets %r is not [begin, end]" % (name, offs))
        begin, end = offs
        if end < begin:
            raise bad("tensor %r: data_offsets [%d, %d] end before they begin" % (name, begin, end))
        if end > data_len:
            raise bad(
                "tensor %r: data_offsets [%d, %d] run past the %d-byte data region (file truncated?)"
                % (name, begin, end, data_len)
            )
        itemsize = DTYPES[dt][0]
        numel = 1
        for d in shape:
            numel *= d
        if numel * itemsize != end - begin:
            raise bad(
                "tensor %r: shape %r of %s needs %d bytes but data_offsets [%d, %d] hold %d"
                % (name, shape, dt, numel * itemsize, begin, end, end - begin)
            )
        infos[name] = TensorInfo(name, dt, tuple(shape), begin, end, itemsize)
    prev = None
    for t in sorted(infos.values(), key=lambda t: (t.begin, t.end)):
        if prev is not None and t.begin < prev.end and t.end > t.begin:
            raise bad(
                "tensors %r [%d, %d] and %r [%d, %d] overlap" % (prev.name, prev.begin, prev.end, t.name, t.begin, t.end)
            )
        if t.end > t.begin:
            prev = t
    return 8 + n, infos, meta or {}


def _read_head(path):
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        head = f.read(8)
        if len(head) == 8:
            (n,) = struct.unpack("<Q", head)
            if n <= MAX_HEADER_SIZE and 8 + n <= size:
                head += f.read(n)
    return head, size


def read_header(path):
    """Parse and validate the header: returns ``(tensors, metadata,
    data_start)`` where tensors maps names to :class:`TensorInfo` (in file
    order of the JSON) and metadata is the ``__metadata__`` dict."""
    path = os.fspath(path)
    head, size = _read_head(path)
    start, infos, meta = _parse(path, head, size)
    return infos, meta, start


def _torch_dtype(torch, name):
    attr = DTYPES[name][2]
    dt = getattr(torch, attr, None)
    if dt is None:
        raise HeaderError("dtype %s needs torch.%s, which this torch (%s) lacks" % (name, attr, torch.__version__))
    return dt


def _numpy_dtype(np, name):
    s = DTYPES[name][1]
    if s is not None:
        return np.dtype(s)
    try:
        import ml_dtypes  # noqa: F401 (optional)

        return np.dtype(getattr(ml_dtypes, {"BF16": "bfloat16", "F8_E4M3": "float8_e4m3fn", "F8_E5M2": "float8_e5m2"}[name]))
    except ImportError:
        return np.dtype("<u2" if name == "BF16" else "u1")


def _read_region(path, buf, start, length, piece_size):
    """Read [start, start + length) of path into buf with pieces in flight."""
    if length == 0:
        return
    with _file.File(path, "r") as f:
        fut = f.pread(buf, size=length, file_offset=start, task_size=piece_size)
        got = fut.wait()
    if got != length:
        raise HeaderError("%s: expected %d bytes of tensor data, read %d (file truncated?)" % (path, length, got))


def load_file(path, device="cpu", framework=None, piece_size=DEFAULT_PIECE_SIZE):
    """Load every tensor of a safetensors file.

    Args:
        path: the file.
        device: "cpu", "cuda", "cuda:N", a torch.device or a device index
            (CUDA needs torch).
        framework: "torch" or "numpy"; default torch when importable.
        piece_size: bytes per read operation (all go in flight at once).

    Returns:
        dict name -> tensor (torch.Tensor or numpy.ndarray), views into one
        buffer holding the data region (tensors at offsets not a multiple of
        their item size are copies).

    Raises:
        HeaderError (a ValueError) for a malformed file; opends.Error for an
        I/O failure.
    """
    path = os.fspath(path)
    infos, _meta, start = read_header(path)
    length = max((t.end for t in infos.values()), default=0)
    if framework is None:
        try:
            import torch  # noqa: F401

            framework = "torch"
        except ImportError:
            framework = "numpy"
    if framework == "torch":
        return _load_torch(path, infos, start, length, device, piece_size)
    if framework != "numpy":
        raise ValueError("framework must be 'torch' or 'numpy', not %r" % (framework,))
    if str(device) != "cpu":
        raise ValueError("device %r needs torch (framework='numpy' loads to cpu only)" % (device,))
    return _load_numpy(path, infos, start, length, piece_size)


def _load_numpy(path, infos, start, length, piece_size):
    import numpy as np

    buf = np.empty(length, dtype=np.uint8)
    _read_region(path, buf, start, length, piece_size)
    out = {}
    for name, t in infos.items():
        dt = _numpy_dtype(np, t.dtype)
        raw = buf[t.begin : t.end]
        if t.begin % dt.itemsize:
            raw = raw.copy()  # np.empty/copy memory is aligned for any item size
        out[name] = raw.view(dt).reshape(t.shape)
    return out


def _load_torch(path, infos, start, length, device, piece_size):
    import torch

    dev = torch.device(device if not isinstance(device, int) else "cuda:%d" % device)
    if dev.type == "cuda" and dev.index is None:
        dev = torch.device("cuda", torch.cuda.current_device())
    dtypes = {t.dtype: _torch_dtype(torch, t.dtype) for t in infos.values()}
    if dev.type == "cuda":
        with torch.cuda.device(dev):
            buf = torch.empty(length, dtype=torch.uint8, device=dev)
            # memory from the caching allocator may still be used by work
            # queued on the stream; OpenDS writes outside stream order
            torch.cuda.current_stream(dev).synchronize()
            _read_region(path, buf, start, length, piece_size)
    else:
        buf = torch.empty(length, dtype=torch.uint8, device=dev)
        _read_region(path, buf, start, length, piece_size)
    out = {}
    for name, t in infos.items():
        dt = dtypes[t.dtype]
        if t.end == t.begin:
            out[name] = torch.empty(t.shape, dtype=dt, device=dev)
            continue
        raw = buf[t.begin : t.end]
        if t.begin % t.itemsize:
            raw = raw.clone()  # fresh allocations are aligned for any item size
        out[name] = raw.view(dt).reshape(t.shape)
    return out
