"""Turning Python objects into (pointer, byte size) for the C library.

Accepted, in this order of preference:

* PyTorch tensors (CPU or CUDA): ``data_ptr()``, ``is_contiguous()``;
* objects with ``__cuda_array_interface__`` (CuPy, Numba, RMM, ...);
* objects with ``__array_interface__`` (NumPy arrays and friends);
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
    ``device`` (True for CUDA memory), ``readonly``. ``release()`` drops the
    export; it is also dropped when the object is collected."""

    __slots__ = ("ptr", "nbytes", "device", "readonly", "obj", "_view")

    def __init__(self, ptr, nbytes, device, readonly, obj, view=None):
        self.ptr = ptr
        self.nbytes = nbytes
        self.device = device
        self.readonly = readonly
        self.obj = obj
        self._view = view

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
        return BufferRef(ptr, nbytes, device, readonly, obj)
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
            "%s: %s is not a buffer (expected a NumPy/CuPy array, a torch tensor, or an object with the "
            "buffer protocol such as bytearray, memoryview or mmap)" % (what, type(obj).__name__)
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


def _is_torch_tensor(obj):
    t = type(obj)
    return t.__module__.startswith("torch") and hasattr(obj, "data_ptr") and hasattr(obj, "is_contiguous")


def get_buffer(obj, writable, what="buf"):
    """Return a :class:`BufferRef` for obj. ``writable`` is True when the
    library will write into the memory (reads from a file)."""
    if isinstance(obj, BufferRef):
        return obj
    if _is_torch_tensor(obj):
        if not obj.is_contiguous():
            raise ValueError("%s: the tensor is not contiguous (call .contiguous())" % what)
        nbytes = obj.numel() * obj.element_size()
        return BufferRef(int(obj.data_ptr()), nbytes, obj.device.type == "cuda", False, obj)
    iface = getattr(obj, "__cuda_array_interface__", None)
    if iface is not None:
        return _from_interface(obj, iface, True, writable, what)
    if not isinstance(obj, (bytes, bytearray, memoryview)):
        iface = getattr(obj, "__array_interface__", None)
        if iface is not None:
            return _from_interface(obj, iface, False, writable, what)
    return _from_buffer_protocol(obj, writable, what)
