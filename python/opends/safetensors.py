"""Load safetensors files with OpenDS, in step with the safetensors package.

:func:`load_file` reads a ``.safetensors`` file (or a sharded checkpoint's
``model.safetensors.index.json``) into ONE buffer per file on the target
device (a torch uint8 tensor, or a NumPy array when torch is not installed or
``framework="numpy"``) with large reads all in flight at once, and returns
``{name: tensor}``. The result equals ``safetensors.torch.load_file(path,
device=...)`` byte for byte, dtype for dtype (python/tests/test_safetensors_ref.py
checks it against files the safetensors package wrote).

Storage: by default every tensor of a file is a view of that file's one
buffer. Keeping any one tensor alive keeps the whole buffer alive, and
``torch.save`` of one tensor writes the whole buffer. ``copy=True`` gives each
tensor its own storage (one more copy of the data, as safetensors does).
The views of a whole-file load are made without autograd's view tracking:
``t._base`` is None and each tensor has its own version counter, as
safetensors' separate tensors do (they cover disjoint bytes, so an in-place
change to one has nothing to tell the others).

:class:`safe_open` reads lazily, like ``safetensors.safe_open``: ``keys()``,
``metadata()``, ``get_tensor(name)`` (one read into the tensor's own
storage). ``load_file(..., keys=[...])`` loads a subset.

Format (as documented by the safetensors project): an 8-byte little-endian
header length N, N bytes of a UTF-8 JSON object mapping each tensor name to
``{"dtype", "shape", "data_offsets": [begin, end]}`` (offsets relative to
the data region, which starts at byte 8 + N), and an optional
``"__metadata__"`` object of strings.

Data types: every one safetensors 0.8 reads into torch: BOOL, U8, I8, I16,
U16, I32, U32, I64, U64, F16, BF16, F32, F64, C64, F8_E4M3, F8_E4M3FNUZ,
F8_E5M2, F8_E5M2FNUZ, F8_E8M0 and F4 (torch.float4_e2m1fn_x2: two values per
byte, so the last dimension is half the header's), where this torch has the
dtype. NumPy results: BF16 and F8 types are ml_dtypes types when ml_dtypes
is installed, else raw bits (uint16 / uint8); F4 is always uint8 bytes of
two packed values (ml_dtypes' float4 takes a byte per value).

Validation, as the reference: header length and size limit, JSON, duplicate
names, dtypes, shapes against sizes, offsets in range and not overlapping.
Unlike the reference, gaps between tensors and trailing bytes after the last
one are accepted. A whole-file load indexes the header in C (libopends'
header indexer, opends/_stindex.py) where it can; anything it does not
index, errors included, goes to the Python parser here, so the tensors and
the messages are the same either way (only faster for the ordinary file).

Alignment: a tensor whose offset is not a multiple of its item size is
copied into its own allocation instead of viewed.
"""

import bisect
import contextlib
import gc
import json
import os
import struct
import sys
from typing import Any, Dict, Iterable, List, Optional, Tuple

from . import _stfast
from . import file as _file

__all__ = ["load_file", "safe_open", "read_header", "HeaderError", "DTYPES", "DEFAULT_PIECE_SIZE"]

#: Bytes per read operation; all pieces are in flight at once.
DEFAULT_PIECE_SIZE = 64 << 20

#: Largest header accepted (the safetensors project's own limit).
MAX_HEADER_SIZE = 100 * 1000 * 1000

#: Reads of a subset merge ranges closer than this (one read beats two).
_MERGE_GAP = 1 << 20

# name -> (bits per value, NumPy dtype or "ml_dtypes.<name>" or None, torch
# attribute). The names and the torch types are safetensors' own
# (safetensors/torch.py _TYPES and the packed float4_e2m1fn_x2).
DTYPES = {
    "BOOL": (8, "?", "bool"),
    "U8": (8, "u1", "uint8"),
    "I8": (8, "i1", "int8"),
    "I16": (16, "<i2", "int16"),
    "U16": (16, "<u2", "uint16"),
    "I32": (32, "<i4", "int32"),
    "U32": (32, "<u4", "uint32"),
    "I64": (64, "<i8", "int64"),
    "U64": (64, "<u8", "uint64"),
    "F16": (16, "<f2", "float16"),
    "BF16": (16, "ml_dtypes.bfloat16", "bfloat16"),
    "F32": (32, "<f4", "float32"),
    "F64": (64, "<f8", "float64"),
    "C64": (64, "<c8", "complex64"),
    "F8_E4M3": (8, "ml_dtypes.float8_e4m3fn", "float8_e4m3fn"),
    "F8_E4M3FNUZ": (8, "ml_dtypes.float8_e4m3fnuz", "float8_e4m3fnuz"),
    "F8_E5M2": (8, "ml_dtypes.float8_e5m2", "float8_e5m2"),
    "F8_E5M2FNUZ": (8, "ml_dtypes.float8_e5m2fnuz", "float8_e5m2fnuz"),
    "F8_E8M0": (8, "ml_dtypes.float8_e8m0fnu", "float8_e8m0fnu"),
    "F4": (4, None, "float4_e2m1fn_x2"),
}


class HeaderError(ValueError):
    """The file is not a valid safetensors file; the message names the
    file and the problem."""


class TensorInfo:
    """One header entry: ``name``, ``dtype`` (safetensors name), ``shape``
    (tuple, as in the header), ``begin``/``end`` (offsets in the data
    region), ``itemsize`` (bytes of one stored item: 1 for F4)."""

    __slots__ = ("name", "dtype", "shape", "begin", "end", "itemsize")

    def __init__(self, name: str, dtype: str, shape: Tuple[int, ...], begin: int, end: int, itemsize: int):
        self.name, self.dtype, self.shape = name, dtype, shape
        self.begin, self.end, self.itemsize = begin, end, itemsize

    def __repr__(self) -> str:
        return "TensorInfo(%r, %s, %r, [%d, %d))" % (self.name, self.dtype, self.shape, self.begin, self.end)


def _no_duplicates(pairs):
    d = dict(pairs)
    if len(d) != len(pairs):
        seen = set()
        dup = next(k for k, _ in pairs if k in seen or seen.add(k))
        raise HeaderError("duplicate key %r" % dup)
    return d


def _loads(raw: bytes):
    """json.loads that rejects duplicate keys, as safetensors does. The hook
    that sees duplicates costs ~60% more on a 20,000-tensor header, so it
    runs only when a cheap count says a name may repeat: every entry has
    one "data_offsets" key, so more of them than entries means a duplicate
    (or a name or value spelt "data_offsets", which the exact parse settles).
    orjson parses where it is installed (several times faster); where it
    refuses, the standard parser decides."""
    hdr = _stfast.fast_json(raw)
    if hdr is None:
        hdr = json.loads(raw.decode("utf-8"))
    if isinstance(hdr, dict):
        n = raw.count(b'"data_offsets"')
        odd = 1 if "data_offsets" in hdr else 0  # keys are unique
        meta = hdr.get("__metadata__")
        if isinstance(meta, dict):
            odd += sum(1 for k, v in meta.items() if k == "data_offsets" or v == "data_offsets")
        if n != len(hdr) - (meta is not None) + odd:
            hdr = json.loads(raw.decode("utf-8"), object_pairs_hook=_no_duplicates)
    return hdr


def _header(path: str, head: bytes, file_size: int):
    """The header's length checks and JSON: (n, hdr without __metadata__,
    metadata or {})."""

    def bad(msg):
        return HeaderError("%s: %s" % (path, msg))

    if file_size < 8 or len(head) < 8:
        raise bad("file is %d bytes, shorter than the 8-byte header length" % file_size)
    (n,) = struct.unpack("<Q", head[:8])
    if n > MAX_HEADER_SIZE:
        raise bad("header length %d is above the %d-byte limit" % (n, MAX_HEADER_SIZE))
    if 8 + n > file_size:
        raise bad("header length %d runs past the end of the %d-byte file" % (n, file_size))
    try:
        hdr = _loads(head[8 : 8 + n])
    except HeaderError as e:
        raise bad("header has a %s (safetensors rejects it)" % e) from None
    except (UnicodeDecodeError, ValueError) as e:
        raise bad("header is not valid UTF-8 JSON (%s)" % e) from None
    if not isinstance(hdr, dict):
        raise bad("header is a JSON %s, not an object" % type(hdr).__name__)
    meta = hdr.pop("__metadata__", None)
    if meta is not None and not isinstance(meta, dict):
        raise bad("__metadata__ is not an object")
    return n, hdr, meta or {}


def _parse(path: str, head: bytes, file_size: int):
    """Validate the header; return (data_start, {name: TensorInfo}, metadata)."""

    def bad(msg):
        return HeaderError("%s: %s" % (path, msg))

    n, hdr, meta = _header(path, head, file_size)
    data_len = file_size - 8 - n
    infos = {}
    dtypes = DTYPES
    ordered = True  # tensors in file order need no sort for the overlap check
    last_end = 0
    for name, e in hdr.items():
        try:
            dt = e["dtype"]
            shape = e["shape"]
            begin, end = e["data_offsets"]
            bits = dtypes[dt][0]
            numel = 1
            for d in shape:
                if type(d) is not int or d < 0:
                    raise TypeError
                numel *= d
            if type(begin) is not int or type(end) is not int or begin < 0 or type(shape) is not list:
                raise ValueError
        except (KeyError, TypeError, ValueError):
            raise bad(_entry_problem(name, e)) from None
        if end > data_len or end < begin or numel * bits != (end - begin) * 8:
            raise bad(_range_problem(name, shape, dt, begin, end, data_len, numel * bits))
        infos[name] = TensorInfo(name, dt, tuple(shape), begin, end, bits // 8 or 1)
        if end > begin:
            if begin < last_end:
                ordered = False
            last_end = end
    if not ordered:
        prev = None
        for t in sorted(infos.values(), key=lambda t: (t.begin, t.end)):
            if t.end > t.begin:
                if prev is not None and t.begin < prev.end:
                    raise bad(
                        "tensors %r [%d, %d] and %r [%d, %d] overlap"
                        % (prev.name, prev.begin, prev.end, t.name, t.begin, t.end)
                    )
                prev = t
    return 8 + n, infos, meta


def _range_problem(name, shape, dt, begin, end, data_len, bits) -> str:
    if end < begin:
        return "tensor %r: data_offsets [%d, %d] end before they begin" % (name, begin, end)
    if end > data_len:
        return "tensor %r: data_offsets [%d, %d] run past the %d-byte data region (file truncated?)" % (
            name,
            begin,
            end,
            data_len,
        )
    return "tensor %r: shape %r of %s needs %s bytes but data_offsets [%d, %d] hold %d" % (
        name,
        shape,
        dt,
        _fmt_bytes(bits),
        begin,
        end,
        end - begin,
    )


def _fmt_bytes(bits: int) -> str:
    return "%d" % (bits // 8) if bits % 8 == 0 else "%g" % (bits / 8)


def _entry_problem(name: str, e: Any) -> str:
    """The message for an entry that failed the fast checks."""
    if not isinstance(e, dict):
        return "tensor %r: entry is not an object" % name
    dt = e.get("dtype")
    if dt not in DTYPES:
        return "tensor %r: unknown dtype %r" % (name, dt)
    shape = e.get("shape")
    if not isinstance(shape, list) or not all(type(d) is int and d >= 0 for d in shape):
        return "tensor %r: shape %r is not a list of non-negative integers" % (name, shape)
    return "tensor %r: data_offsets %r is not [begin, end]" % (name, e.get("data_offsets"))


def _read_head(path: str) -> Tuple[bytes, int]:
    """The header bytes and the file size; a URL source has no size known
    up front (reads past the end come back short and are errors then)."""
    if _file.is_url(path):
        with _file.File(path) as uf:
            head = _stfast.head_url(uf, MAX_HEADER_SIZE)
        n = struct.unpack("<Q", head[:8])[0] if len(head) >= 8 else 0
        return head, (8 + n + (1 << 62) if len(head) == 8 + n else len(head))
    with open(path, "rb", buffering=0) as f:
        size = os.fstat(f.fileno()).st_size
        head = f.read(8)
        if len(head) == 8:
            (n,) = struct.unpack("<Q", head)
            if n <= MAX_HEADER_SIZE and 8 + n <= size:
                # the length again with the header, in one bytes object: no
                # concatenation's copy of a big header
                head = os.pread(f.fileno(), 8 + n, 0)
    return head, size


def read_header(path) -> Tuple[Dict[str, TensorInfo], Dict[str, str], int]:
    """Parse and validate the header: returns ``(tensors, metadata,
    data_start)`` where tensors maps names to :class:`TensorInfo` (in file
    order of the JSON) and metadata is the ``__metadata__`` dict."""
    path = os.fspath(path)
    head, size = _read_head(path)
    start, infos, meta = _parse(path, head, size)
    return infos, meta, start


# ---------------------------------------------------------------------------
# dtypes
# ---------------------------------------------------------------------------


def _framework(framework: Optional[str]) -> str:
    if framework is None:
        try:
            import torch  # noqa: F401

            return "torch"
        except ImportError:
            return "numpy"
    f = {"pt": "torch", "torch": "torch", "np": "numpy", "numpy": "numpy"}.get(framework)
    if f is None:
        raise ValueError("framework must be 'torch' ('pt') or 'numpy' ('np'), not %r" % (framework,))
    return f


def _torch_dtype(torch, name: str):
    attr = DTYPES[name][2]
    dt = getattr(torch, attr, None)
    if dt is None:
        raise HeaderError("dtype %s needs torch.%s, which this torch (%s) lacks" % (name, attr, torch.__version__))
    return dt


def _numpy_dtype(np, name: str):
    s = DTYPES[name][1]
    if s is None:  # F4: packed bytes
        return np.dtype("u1")
    if not s.startswith("ml_dtypes."):
        return np.dtype(s)
    try:
        import ml_dtypes

        return np.dtype(getattr(ml_dtypes, s[len("ml_dtypes.") :]))
    except (ImportError, AttributeError):
        return np.dtype("<u2" if DTYPES[name][0] == 16 else "u1")


def _storage_shape(t: TensorInfo) -> Tuple[int, ...]:
    """The shape of the stored items: F4 packs two values per byte."""
    if DTYPES[t.dtype][0] != 4:
        return t.shape
    if not t.shape or t.shape[-1] % 2:
        raise HeaderError("tensor %r: F4 shape %r has no even last dimension to pack" % (t.name, t.shape))
    return t.shape[:-1] + (t.shape[-1] // 2,)


# ---------------------------------------------------------------------------
# reading
# ---------------------------------------------------------------------------


def _spans(infos: Iterable[TensorInfo]) -> List[Tuple[int, int]]:
    """[begin, end) ranges of the data region covering infos, merged when
    closer than _MERGE_GAP."""
    out: List[List[int]] = []
    for t in sorted(infos, key=lambda t: t.begin):
        if t.end == t.begin:
            continue
        if out and t.begin - out[-1][1] <= _MERGE_GAP:
            out[-1][1] = max(out[-1][1], t.end)
        else:
            out.append([t.begin, t.end])
    return [(a, b) for a, b in out]


def _read_spans(path: str, buf, start: int, spans, piece_size: int) -> None:
    """Read each [begin, end) of the data region (at start) into buf at
    begin - spans[0][0] ... packed one after another; all in flight."""
    if not spans:
        return
    with _file.File(path, "r") as f:
        futs = []
        off = 0
        for a, b in spans:
            futs.append((f.pread(buf, b - a, start + a, piece_size, buf_offset=off), b - a))
            off += b - a
        for fut, want in futs:
            got = fut.result()
            if got != want:
                raise HeaderError("%s: expected %d bytes of tensor data, read %d (file truncated?)" % (path, want, got))


def _layout(spans) -> Tuple[int, Dict[int, int]]:
    """Total bytes and {span begin: offset in the buffer}."""
    where, off = {}, 0
    for a, b in spans:
        where[a] = off
        off += b - a
    return off, where


def _buf_offsets(infos: List[TensorInfo], spans) -> List[int]:
    """Offset in the packed buffer of each info's data."""
    _, where = _layout(spans)
    starts = [a for a, _ in spans]
    out = []
    for t in infos:
        if t.end == t.begin:
            out.append(0)
            continue
        a = starts[bisect.bisect_right(starts, t.begin) - 1]
        out.append(where[a] + t.begin - a)
    return out


def _select(path: str, infos: Dict[str, TensorInfo], keys) -> List[TensorInfo]:
    if keys is None:
        return list(infos.values())
    if isinstance(keys, str):
        raise TypeError("keys must be a list of tensor names, not a str")
    sel = []
    for k in keys:
        t = infos.get(k)
        if t is None:
            raise KeyError("%s: no tensor %r" % (path, k))
        sel.append(t)
    return sel


def _torch_device(torch, device):
    dev = torch.device(device if not isinstance(device, int) else "cuda:%d" % device)
    if dev.type == "cuda" and dev.index is None:
        dev = torch.device("cuda", torch.cuda.current_device())
    return dev


def _torch_buffer(torch, dev, n: int):
    if dev.type == "cuda":
        with torch.cuda.device(dev):
            buf = torch.empty(n, dtype=torch.uint8, device=dev)
            # memory from the caching allocator may still be used by work
            # queued on the stream; OpenDS writes outside stream order
            torch.cuda.current_stream(dev).synchronize()
        return buf
    return torch.empty(n, dtype=torch.uint8, device=dev)


def _tensors_torch(torch, dev, buf, sel, offs, copy: bool) -> Dict[str, Any]:
    out = {}
    typed = {}  # dtype -> the whole buffer viewed as it (aligned tensors)
    dts = {}
    n = buf.numel()
    for t, off in zip(sel, offs):
        dt = dts.get(t.dtype)
        if dt is None:
            dt = dts[t.dtype] = _torch_dtype(torch, t.dtype)
        shape = t.shape if t.dtype != "F4" else _storage_shape(t)
        if t.end == t.begin:
            out[t.name] = torch.empty(shape, dtype=dt, device=dev)
            continue
        isz = t.itemsize
        if off % isz:
            # fresh allocations are aligned for any item size
            out[t.name] = buf[off : off + t.end - t.begin].clone().view(dt).reshape(shape)
            continue
        whole = typed.get(dt)
        if whole is None:
            whole = typed[dt] = buf[: n - n % isz].view(dt)
        numel = (t.end - t.begin) // isz
        v = whole[off // isz : off // isz + numel].view(shape)
        out[t.name] = _clone(torch, v) if copy else v
    return out


def _clone(torch, v):
    """v.clone(); torch has no copy kernel for some dtypes (float4): those
    are cloned as bytes."""
    try:
        return v.clone()
    except (NotImplementedError, RuntimeError):
        return v.view(torch.uint8).clone().view(v.dtype)


def _tensors_numpy(np, buf, sel, offs, copy: bool) -> Dict[str, Any]:
    out = {}
    dtypes = {}
    ndarray = np.ndarray
    for t, off in zip(sel, offs):
        dt = dtypes.get(t.dtype)
        if dt is None:
            dt = dtypes[t.dtype] = _numpy_dtype(np, t.dtype)
        shape = t.shape if t.dtype != "F4" else _storage_shape(t)
        if t.end == t.begin:
            out[t.name] = np.empty(shape, dt)
        elif not copy and off % dt.itemsize == 0:
            out[t.name] = ndarray(shape, dt, buf, off)
        else:  # misaligned, or asked for: its own (aligned) allocation
            a = np.empty(shape, dt)
            a.reshape(-1).view(np.uint8)[:] = buf[off : off + t.end - t.begin]
            out[t.name] = a
    return out


@contextlib.contextmanager
def _gc_paused():
    """The cyclic collector off while a header's objects are made: parsing
    and wrapping 20,000 tensors makes ~200,000 objects, none of them in a
    cycle, and the collections they trigger took a third of the time."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _load_one(path: str, device, framework: str, piece_size: int, keys, copy: bool) -> Dict[str, Any]:
    with _gc_paused():
        return _load_one_gc_off(path, device, framework, piece_size, keys, copy)


def _load_one_gc_off(path: str, device, framework: str, piece_size: int, keys, copy: bool) -> Dict[str, Any]:
    if keys is None:
        return _stfast.load_all(sys.modules[__name__], path, [device], framework, piece_size, copy)[0]
    infos, _meta, start = read_header(path)
    sel = _select(path, infos, keys)
    if keys is None:  # the whole data region up to the last tensor: one span
        total = max((t.end for t in sel), default=0)
        spans = [(0, total)] if total else []
        offs = [t.begin for t in sel]
    else:
        spans = _spans(sel)
        total, _ = _layout(spans)
        offs = _buf_offsets(sel, spans)
    if framework == "torch":
        import torch

        dev = _torch_device(torch, device)
        for name in {t.dtype for t in sel}:  # a dtype this torch lacks fails before any read
            _torch_dtype(torch, name)
        buf = _torch_buffer(torch, dev, total)
        _read_spans(path, buf, start, spans, piece_size)
        return _tensors_torch(torch, dev, buf, sel, offs, copy)
    if str(device) != "cpu":
        raise ValueError("device %r needs torch (framework='numpy' loads to cpu only)" % (device,))
    import numpy as np

    buf = np.empty(total, dtype=np.uint8)
    _read_spans(path, buf, start, spans, piece_size)
    return _tensors_numpy(np, buf, sel, offs, copy)


def _itemsize(name: str) -> int:
    return DTYPES[name][0] // 8 or 1


_BITS = {k: v[0] for k, v in DTYPES.items()}


def _alloc(framework: str, device, n: int):
    """A uint8 buffer of n bytes on device (tests replace it to place
    buffers at simulated devices' addresses)."""
    if framework == "torch":
        import torch

        return _torch_buffer(torch, _torch_device(torch, device), n)
    if str(device) != "cpu":
        raise ValueError("device %r needs torch (framework='numpy' loads to cpu only)" % (device,))
    import numpy as np

    return np.empty(n, dtype=np.uint8)


def _shards(index_path: str, keys) -> Dict[str, List[str]]:
    """{shard file: [tensor names]} of a model.safetensors.index.json."""
    with open(index_path, "rb") as f:
        try:
            index = json.loads(f.read().decode("utf-8"), object_pairs_hook=_no_duplicates)
        except (HeaderError, UnicodeDecodeError, ValueError) as e:
            raise HeaderError("%s: not a valid index (%s)" % (index_path, e)) from None
    wm = index.get("weight_map") if isinstance(index, dict) else None
    if not isinstance(wm, dict) or not all(isinstance(v, str) for v in wm.values()):
        raise HeaderError("%s: no weight_map of tensor name -> file" % index_path)
    names = list(wm) if keys is None else list(keys)
    base = os.path.dirname(os.path.abspath(index_path))
    out: Dict[str, List[str]] = {}
    for k in names:
        if k not in wm:
            raise KeyError("%s: no tensor %r in weight_map" % (index_path, k))
        shard = wm[k]
        if os.path.isabs(shard) or os.path.normpath(shard).startswith(".."):
            raise HeaderError("%s: shard %r is outside the index's folder" % (index_path, shard))
        out.setdefault(os.path.join(base, shard), []).append(k)
    return out


def load_file(
    path,
    device: Any = "cpu",
    framework: Optional[str] = None,
    piece_size: int = DEFAULT_PIECE_SIZE,
    *,
    keys: Optional[Iterable[str]] = None,
    copy: bool = False,
) -> Dict[str, Any]:
    """Load the tensors of a safetensors file, or of a sharded checkpoint
    given by its ``*.index.json`` (``weight_map``: name -> shard file).

    Args:
        path: the file or the index.
        device: "cpu", "cuda", "cuda:N", a torch.device or a device index
            (CUDA needs torch). A list of devices (e.g. ["cuda:0",
            "cuda:1"]) returns a list of dicts, one per device in that
            order: each file's data is read from storage once and placed
            on every device (File.read_fanout: GPU to GPU over NVLink or
            PCIe peer links where there are some). With keys, the whole
            file is read and the subset kept.
        framework: "torch"/"pt" or "numpy"/"np"; default torch when
            importable.
        piece_size: bytes per read operation (all go in flight at once).
        keys: load only these tensors (KeyError for a missing one); their
            byte ranges are read, merged when less than 1 MiB apart.
        copy: give each tensor its own storage instead of a view of the
            file's one buffer (see the module's notes).

    Returns:
        dict name -> tensor (torch.Tensor or numpy.ndarray); a list of
        them for a list of devices.

    Raises:
        HeaderError (a ValueError) for a malformed file or index; KeyError
        for a key not in it; opends.Error for an I/O failure.
    """
    path = os.fspath(path)
    fw = _framework(framework)
    if isinstance(device, (list, tuple)):
        return _load_devices(path, list(device), fw, piece_size, keys, copy)
    if path.endswith(".index.json"):
        out: Dict[str, Any] = {}
        for shard, names in _shards(path, keys).items():
            got = _load_one(shard, device, fw, piece_size, names, copy)
            out.update(got)
        return out
    return _load_one(path, device, fw, piece_size, keys, copy)


def _load_devices(path: str, devices: list, fw: str, piece_size: int, keys, copy: bool) -> List[Dict[str, Any]]:
    """load_file with a list of devices: one dict per device, each file's
    data read once and placed on all of them (File.read_fanout)."""
    if not 1 <= len(devices) <= 64:
        raise ValueError("device: a list of 1 to 64 devices, not %d" % len(devices))
    if keys is not None and isinstance(keys, str):
        raise TypeError("keys must be a list of tensor names, not a str")
    files = _shards(path, keys) if path.endswith(".index.json") else {path: None if keys is None else list(keys)}
    outs: List[Dict[str, Any]] = [{} for _ in devices]
    with _gc_paused():
        for shard, names in files.items():
            got = _stfast.load_all(sys.modules[__name__], shard, devices, fw, piece_size, copy)
            for out, g in zip(outs, got):
                if names is None:
                    out.update(g)
                    continue
                for k in names:  # a subset: the whole file was read once
                    if k not in g:
                        raise KeyError("%s: no tensor %r" % (shard, k))
                    out[k] = g[k]
    return outs


class safe_open:
    """Lazy access like ``safetensors.safe_open``::

        with opends.safetensors.safe_open(path, framework="pt", device="cuda:0") as f:
            for k in f.keys():
                t = f.get_tensor(k)     # one read, into the tensor's own storage

    ``keys()`` (sorted, as safetensors), ``metadata()``, ``get_tensor(name)``,
    ``get_tensors(names=None)`` (several at once, reads in flight
    together, each tensor its own storage).
    """

    def __init__(self, filename, framework: str = "pt", device: Any = "cpu"):
        self.path = os.fspath(filename)
        self._framework = _framework(framework)
        self._device = device
        self._infos, self._meta, self._start = read_header(self.path)

    def __enter__(self) -> "safe_open":
        return self

    def __exit__(self, *exc) -> None:
        pass

    def keys(self) -> List[str]:
        return sorted(self._infos)

    def metadata(self) -> Dict[str, str]:
        return dict(self._meta)

    def get_tensor(self, name: str) -> Any:
        return self.get_tensors([name])[name]

    def get_tensors(self, names: Optional[Iterable[str]] = None) -> Dict[str, Any]:
        keys = self.keys() if names is None else list(names)
        # one tensor: its buffer is its own storage; several: copies
        return _load_one(self.path, self._device, self._framework, DEFAULT_PIECE_SIZE, keys, len(keys) > 1)
