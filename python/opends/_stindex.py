"""A safetensors header indexed in C (libopends' opends_safetensors_index,
src/formats/st_index.c) into arrays: names, dtype codes, shapes, offsets.

The Python parser (json/orjson, then _stfast.table's checks) made about ten
Python objects per tensor and took 25 of the ~38 ms a 20,000-tensor load
spent in Python on the H200 host. The C indexer makes none: its arrays come
back as NumPy int64 arrays, the names as one string split once, and the
per-tensor lists (dtypes, shapes, begins, ends) are made only where a later
step asks for them (the loader's fast paths do not).

It indexes only what the Python parser accepts with the same result
(st_index.c's list); anything else, errors included, returns None here and
the Python parser decides, with its own message: results and errors are the
same with or without it (python/tests/test_stindex.py checks both ways).
Without NumPy, or with a libopends that lacks it, it is not used.
"""

import ctypes
from typing import Any, Dict, List, Optional, Tuple

from ._stfast import Table, _numpy


class _Index(ctypes.Structure):
    _fields_ = [
        ("n", ctypes.c_uint64),
        ("names_len", ctypes.c_uint64),
        ("ndims", ctypes.c_uint64),
        ("names", ctypes.c_void_p),
        ("dtype", ctypes.c_void_p),
        ("ndim", ctypes.c_void_p),
        ("dims", ctypes.c_void_p),
        ("begin", ctypes.c_void_p),
        ("end", ctypes.c_void_p),
        ("numel", ctypes.c_void_p),
    ]


#: [index function, free function] once looked up; [] before; [None] where
#: this libopends has none (an older build: the Python parser does it all).
_fns: List[Any] = []

#: Set False to index every header with the Python parser (tests compare).
ENABLED = True


def _functions():
    if not _fns:
        try:
            from ._lib import lib

            f, free = lib.opends_safetensors_index, lib.opends_safetensors_index_free
            f.restype = ctypes.c_int
            f.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_uint64, ctypes.c_char_p, ctypes.c_char_p,
                          ctypes.POINTER(ctypes.POINTER(_Index))]  # fmt: skip
            free.restype = None
            free.argtypes = [ctypes.POINTER(_Index)]
            _fns.append((f, free))
        except (AttributeError, ImportError):
            _fns.append(None)
    return _fns[0]


#: (name, bits) pairs of a dtype list -> (names, b"NAME\0...\0", bits):
#: keyed by the list's contents (a dict's id() is reused once it is freed)
_tables: Dict[Tuple[Tuple[str, int], ...], Any] = {}


def _dtype_table(bits_of: Dict[str, int]):
    key = tuple(bits_of.items())
    t = _tables.get(key)
    if t is None:
        names = [k for k, _ in key]
        t = (names, b"".join(k.encode() + b"\0" for k in names) + b"\0", bytes(b for _, b in key))
        if len(_tables) >= 16:  # (callers pass one or two lists: never grows)
            _tables.clear()
        _tables[key] = t
    return t


class IndexTable(Table):
    """A Table whose per-tensor lists are made on first use from the
    arrays (the loader's fast paths use only the arrays and names)."""

    __slots__ = ("_code", "_ndim", "_dims", "_all")

    def _lazy(self, slot, make):
        try:
            return slot.__get__(self)
        except AttributeError:
            v = make()
            slot.__set__(self, v)
            return v

    @property
    def dtypes(self):
        return self._lazy(Table.dtypes, lambda: list(map(self._all.__getitem__, self._code.tolist())))

    @property
    def shapes(self):
        return self._lazy(Table.shapes, self._make_shapes)

    @property
    def begins(self):
        return self._lazy(Table.begins, lambda: self.b_np.tolist())

    @property
    def ends(self):
        return self._lazy(Table.ends, lambda: self.e_np.tolist())

    def _make_shapes(self):
        flat, nd = self._dims.tolist(), self._ndim
        if len(nd) and (nd == nd[0]).all():  # one rank: fixed-size slices
            k = int(nd[0])
            return [flat[i : i + k] for i in range(0, len(flat), k)] if k else [[] for _ in range(len(nd))]
        at = [0] + nd.cumsum().tolist()
        return [flat[a:b] for a, b in zip(at, at[1:])]


def table(head: bytes, n: int, data_len: int, bits_of: Dict[str, int]) -> Optional[Table]:
    """The header head[8:8+n] as an IndexTable, or None where it is not
    indexed here (the Python parser then decides: an error, or a header
    the indexer leaves to it)."""
    np = _numpy()
    fns = _functions() if ENABLED else None
    if fns is None or np is None or len(head) < 8 + n or not isinstance(head, bytes):
        return None
    f, free = fns
    all_names, names_z, bits = _dtype_table(bits_of)
    ix = ctypes.POINTER(_Index)()
    # the header in place (head stays referenced here): a slice's copy of a
    # big header cost more than the copy (fresh pages)
    at_hdr = ctypes.cast(ctypes.c_char_p(head), ctypes.c_void_p).value + 8
    rc = f(at_hdr, n, data_len, names_z, bits, ctypes.byref(ix))
    if rc < 0:  # -OPENDS_NOMEM_ERROR (the arguments here are never invalid)
        from ._lib import Error, last_detail

        raise Error(-rc, last_detail())
    if rc != 0:
        return None
    try:
        r = ix.contents
        cnt = r.n
        at = ctypes.string_at
        names = at(r.names, r.names_len).decode("utf-8").split("\0") if cnt else [""]
        names.pop()
        code = np.frombuffer(at(r.dtype, cnt), np.uint8) if cnt else np.zeros(0, np.uint8)

        def i64(p, k):
            return np.frombuffer(at(p, 8 * k), np.int64) if k else np.zeros(0, np.int64)

        b, e, numel = i64(r.begin, cnt), i64(r.end, cnt), i64(r.numel, cnt)
        ndim = np.frombuffer(at(r.ndim, cnt), np.uint8) if cnt else np.zeros(0, np.uint8)
        dims = i64(r.dims, r.ndims)
    finally:
        free(ix)
    tab = IndexTable.__new__(IndexTable)
    tab.names, tab.b_np, tab.e_np = names, b, e
    tab._code, tab._ndim, tab._dims, tab._all = code, ndim, dims, all_names
    present = np.flatnonzero(np.bincount(code, minlength=len(all_names))).tolist()
    tab.kinds = [all_names[c] for c in present]
    if len(present) > 1:
        remap = np.zeros(len(all_names), np.int64)
        remap[present] = np.arange(len(present))
        tab.codes = remap[code]
    else:
        tab.codes = None
    tab.numel1d = numel if cnt and (ndim == 1).all() else None
    if not cnt:  # the empty header: every list now (nothing to make), no arrays
        tab.b_np = tab.e_np = None
        for slot in (Table.dtypes, Table.shapes, Table.begins, Table.ends):
            slot.__set__(tab, [])
    return tab
