"""Turning Python objects into (pointer, byte size) for the C library.

Accepted, in this order of preference:

* PyTorch tensors (CPU or CUDA): ``data_ptr()``, ``is_contiguous()``;
* objects with ``__cuda_array_interface__`` (CuPy, Numba, RMM, ...);
* objects with ``__array_interface__`` (NumPy arrays and friends);
* objects with ``__dlpack__`` (JAX, MLX, Paddle, ...): CPU, CUDA,
  CUDA-pinned and CUDA-managed memory;
* any object with the buffer protocol (bytearray, memoryview, mmap,
  array.array, bytes for writes).

The memory must be C-contiguous (ValueError otherwise). Reading into a
read-only object raises TypeError. The returned :class:`BufferRef` keeps the
object (and, for buffer-protocol objects, a buffer export that stops e.g. a
bytearray from being resized) alive until released.
"""

import ctypes
import re

__all__ = ["BufferRef", "get_buffer"]


class _Py_buffer(ctypes.Structure):
    _fields_ = [
        ("buf", ctypes.c_void_p),
        ("obj", ctypes.c_void_p),
        ("len", ctypes.c_ssize_t),
        ("itemsize", ctypes.c_ssize_t),
        ("readonly", ctypes.c_int),
        ("ndim", ctypes.c_int),
        ("format", ctypes.c_char_p),
        ("shape", ctypes.c_void_p),
        ("strides", ctypes.c_void_p),
        ("suboffsets", ctypes.c_void_p),
        ("internal", ctypes.c_void_p),
    ]


_api = ctypes.pythonapi
_api.PyObject_GetBuffer.argtypes = [ctypes.py_object, ctypes.POINTER(_Py_buffer), ctypes.c_int]
_api.PyObject_GetBuffer.restype = ctypes.c_int
_api.PyBuffer_Release.argtypes = [ctypes.POINTER(_Py_buffer)]
_api.PyBuffer_Release.restype = None
_PyBUF_SIMPLE = 0
_PyBUF_WRITABLE = 1


class BufferRef:
    """A pinned view of a caller's buffer: ``ptr`` (int address), ``nbytes``,
    ``device`` (True for CUDA memory), ``readonly``, ``device_index`` (the
    CUDA device's ordinal where the object says it: torch's cuda:N, DLPack's
    device_id, CuPy's device.id; else None). ``release()`` drops the export; it is also
    dropped when the object is collected."""

    __slots__ = ("ptr", "nbytes", "device", "readonly", "obj", "_view", "device_index")

    def __init__(self, ptr, nbytes, device, readonly, obj, view=None, device_index=None):
        self.ptr = ptr
        self.nbytes = nbytes
        self.device = device
        self.readonly = readonly
        self.obj = obj
        self._view = view
        self.device_index = device_index

    def release(self):
        """Release the buffer export (idempotent)."""
        v, self._view = self._view, None
        if v is not None:
            _api.PyBuffer_Release(ctypes.byref(v))
        self.obj = None

    def __del__(self):
        try:
            self.release()
        except Exception:
            pass


_TYPESTR_SIZE = re.compile(r"^[<>|=]?[a-zA-Z](\d+)")


def _itemsize(typestr):
    m = _TYPESTR_SIZE.match(typestr)
    if not m:
        raise TypeError("unsupported array typestr %r" % (typestr,))
    return int(m.group(1))


def _contiguous(shape, strides, itemsize):
    """True if (shape, strides) describe C-contiguous memory (dimensions of
    extent 1 may have any stride; empty arrays are contiguous)."""
    if strides is None:
        return True
    if any(n == 0 for n in shape):
        return True
    expect = itemsize
    for n, s in zip(reversed(shape), reversed(strides)):
        if n != 1 and s != expect:
            return False
        expect *= n
    return True


def _prod(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def _from_interface(obj, iface, device, writable, what):
    if iface.get("mask") is not None:
        raise ValueError("%s: masked arrays are not supported" % what)
    data = iface.get("data")
    shape = tuple(iface.get("shape", ()))
    itemsize = _itemsize(iface["typestr"])
    if not _contiguous(shape, iface.get("strides"), itemsize):
        raise ValueError("%s: the array is not C-contiguous (strides %r)" % (what, iface.get("strides")))
    nbytes = _prod(shape) * itemsize
    if isinstance(data, tuple):
        ptr, readonly = int(data[0] or 0), bool(data[1])
        if writable and readonly:
            raise TypeError("%s: cannot read into a read-only array" % what)
        # CuPy (and Numba's) arrays name their device: .device.id
        dev = getattr(getattr(obj, "device", None), "id", None) if device else None
        return BufferRef(ptr, nbytes, device, readonly, obj, None, dev if type(dev) is int else None)
    if device:
        raise TypeError("%s: __cuda_array_interface__ without a data pointer" % what)
    # data is None (use obj's buffer) or a buffer object, plus 'offset'
    base = _from_buffer_protocol(obj if data is None else data, writable, what)
    off = int(iface.get("offset", 0) or 0)
    if off + nbytes > base.nbytes:
        raise ValueError("%s: array interface offset/size exceed the buffer" % what)
    base.ptr += off
    base.nbytes = nbytes
    return base


def _from_buffer_protocol(obj, writable, what):
    try:
        mv = memoryview(obj)
    except TypeError:
        raise TypeError(
            "%s: %s is not a buffer (expected a NumPy/CuPy array, a torch tensor, an object with __dlpack__, "
            "or one with the buffer protocol such as bytearray, memoryview or mmap)" % (what, type(obj).__name__)
        ) from None
    with mv:
        if not mv.c_contiguous:
            raise ValueError("%s: the buffer is not C-contiguous" % what)
        if writable and mv.readonly:
            raise TypeError("%s: cannot read into a read-only %s" % (what, type(obj).__name__))
        nbytes = mv.nbytes
    view = _Py_buffer()
    flags = _PyBUF_WRITABLE if writable else _PyBUF_SIMPLE
    if _api.PyObject_GetBuffer(obj, ctypes.byref(view), flags) != 0:  # pragma: no cover (raises)
        raise BufferError("%s: could not get the buffer of %s" % (what, type(obj).__name__))
    return BufferRef(view.buf or 0, nbytes, False, bool(view.readonly), obj, view)


# DLPack (dlpack.h, v0.8 / legacy capsule "dltensor")
class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", _DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", _DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


_api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_api.PyCapsule_GetPointer.restype = ctypes.c_void_p
_api.PyCapsule_IsValid.argtypes = [ctypes.py_object, ctypes.c_char_p]
_api.PyCapsule_IsValid.restype = ctypes.c_int
# kDLCPU, kDLCUDA, kDLCUDAHost, kDLCUDAManaged -> device memory?
_DL_DEVICES = {1: False, 2: True, 3: False, 13: True}


def _from_dlpack(obj, writable, what):
    """The capsule is not consumed (not renamed "used_dltensor"), so its own
    destructor frees the tensor when the BufferRef lets it go."""
    dev = getattr(obj, "__dlpack_device__", None)
    if dev is not None:
        dtype_id = dev()[0]
        if int(dtype_id) not in _DL_DEVICES:
            raise TypeError("%s: DLPack device type %d is not CPU or CUDA memory" % (what, int(dtype_id)))
    try:
        cap = obj.__dlpack__(stream=None)
    except TypeError:
        cap = obj.__dlpack__()
    if not _api.PyCapsule_IsValid(cap, b"dltensor"):
        raise TypeError("%s: __dlpack__ of %s did not return a DLPack capsule" % (what, type(obj).__name__))
    t = _DLTensor.from_address(_api.PyCapsule_GetPointer(cap, b"dltensor"))
    if t.device.device_type not in _DL_DEVICES:
        raise TypeError("%s: DLPack device type %d is not CPU or CUDA memory" % (what, t.device.device_type))
    itemsize = (t.dtype.bits * t.dtype.lanes + 7) // 8
    shape = tuple(t.shape[i] for i in range(t.ndim))
    strides = None if not t.strides else tuple(t.strides[i] * itemsize for i in range(t.ndim))
    if not _contiguous(shape, strides, itemsize):
        raise ValueError("%s: the DLPack tensor is not C-contiguous" % what)
    ptr = (t.data or 0) + t.byte_offset
    device = _DL_DEVICES[t.device.device_type]
    return BufferRef(ptr, _prod(shape) * itemsize, device, False, (obj, cap), None, t.device.device_id if device else None)


def _is_torch_tensor(obj):
    t = type(obj)
    return t.__module__.startswith("torch") and hasattr(obj, "data_ptr") and hasattr(obj, "is_contiguous")


def get_buffer(obj, writable, what="buf"):
    """Return a :class:`BufferRef` for obj. ``writable`` is True when the
    library will write into the memory (reads from a file)."""
    if isinstance(obj, BufferRef):
        return obj
    if _is_torch_tensor(obj):
        if obj.device.type not in ("cpu", "cuda"):
            raise TypeError("%s: a tensor on device %r holds no memory OpenDS can reach (cpu or cuda)" % (what, str(obj.device)))
        if getattr(obj, "layout", None) is not None and str(obj.layout) != "torch.strided":
            raise TypeError("%s: a %s tensor is not one block of memory (call .to_dense())" % (what, obj.layout))
        if not obj.is_contiguous():
            raise ValueError("%s: the tensor is not contiguous (call .contiguous())" % what)
        nbytes = obj.numel() * obj.element_size()
        cuda = obj.device.type == "cuda"
        return BufferRef(int(obj.data_ptr()), nbytes, cuda, False, obj, None, obj.device.index if cuda else None)
    iface = getattr(obj, "__cuda_array_interface__", None)
    if iface is not None:
        return _from_interface(obj, iface, True, writable, what)
    if not isinstance(obj, (bytes, bytearray, memoryview)):
        iface = getattr(obj, "__array_interface__", None)
        if iface is not None:
            return _from_interface(obj, iface, False, writable, what)
        if hasattr(obj, "__dlpack__") and not _has_buffer(obj):
            return _from_dlpack(obj, writable, what)
    return _from_buffer_protocol(obj, writable, what)


def _has_buffer(obj):
    try:
        memoryview(obj).release()
        return True
    except TypeError:
        return False
