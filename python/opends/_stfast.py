"""The safetensors loader's per-tensor work done a list at a time.

A file of 20,000 small tensors spent most of its load time in Python per
tensor: a validation loop over the header's entries, an object per entry,
two or three torch calls per view. Here every check is a whole-list
operation that runs in C (map, set, min over the header's lists; with
NumPy, the offsets and sizes as int64 arrays), and the views of one dtype
come from ONE torch call on the file's buffer viewed as that dtype
(``split_with_sizes`` for tensors back to back, ``as_strided`` +
``unbind`` for tensors of one shape evenly spaced), made below autograd's
view tracking (a third of each view's cost). Anything unusual (a check that fails, tensors
out of file order, a misaligned offset) returns None or takes the per-tensor
route, which gives the exact error message; the fast route never accepts what
the per-entry checks would reject.
"""

import contextlib
import itertools
import math
import operator
import os
import struct
import threading
import time
from typing import Any, Dict, List, Optional, Tuple

from .file import File, is_url

_sub, _mul, _ge, _get = operator.sub, operator.mul, operator.ge, operator.itemgetter
_chain, _compress, _repeat = itertools.chain.from_iterable, itertools.compress, itertools.repeat

try:  # a faster JSON parser where installed (pip install orjson)
    import orjson as _orjson
except ImportError:  # pragma: no cover - depends on the environment
    _orjson = None


def fast_json(raw: bytes):
    """orjson's parse of raw, or None (not installed, or it refused: the
    standard parser then decides, with its own message)."""
    if _orjson is None:
        return None
    try:
        return _orjson.loads(raw)
    except Exception:
        return None


class Table:
    """The validated header as parallel lists, in header order; with NumPy,
    begins and ends also as int64 arrays (b_np, e_np) and, for several
    dtypes, each tensor's index into kinds (codes); where every tensor is
    1-D, their lengths (numel1d)."""

    __slots__ = ("names", "dtypes", "shapes", "begins", "ends", "b_np", "e_np", "kinds", "codes", "numel1d")

    def __init__(self, names, dtypes, shapes, begins, ends):
        self.names, self.dtypes, self.shapes = names, dtypes, shapes
        self.begins, self.ends = begins, ends
        self.b_np = self.e_np = self.kinds = self.codes = self.numel1d = None


_numpy_mod: List[Any] = []


def _numpy():
    """NumPy, or None where it is not installed (imported on first use:
    ``import opends`` stays light). With it, the checks and the grouping of
    a big header are whole-array operations; without, list passes."""
    if not _numpy_mod:
        try:
            import numpy
        except ImportError:  # pragma: no cover - depends on the environment
            numpy = None
        _numpy_mod.append(numpy)
    return _numpy_mod[0]


def table(hdr: Dict[str, Any], bits_of: Dict[str, int], data_len: int) -> Optional[Table]:
    """hdr (without __metadata__) as a Table when every entry passes
    safetensors' checks in file order; None otherwise (the caller runs the
    per-entry checks for the message, or for the unordered case)."""
    names = list(hdr)
    ents = list(hdr.values())
    if not ents:
        return Table([], [], [], [], [])
    try:  # (an entry that is not a dict fails the itemgetters: TypeError/KeyError)
        dtypes = list(map(_get("dtype"), ents))
        shapes = list(map(_get("shape"), ents))
        offs = list(map(_get("data_offsets"), ents))
        if set(map(type, shapes)) != {list} or set(map(type, offs)) != {list} or set(map(len, offs)) != {2}:
            return None
        np = _numpy()
        if np is not None:
            return _table_np(np, names, dtypes, shapes, offs, bits_of, data_len)
        begins = list(map(_get(0), offs))
        ends = list(map(_get(1), offs))
        # bool is not int here: type() is exact, as the per-entry checks
        if set(map(type, _chain((begins, ends)))) != {int}:
            return None
        dims = set(map(type, _chain(shapes)))
        if dims - {int} or (dims and min(_chain(shapes)) < 0):
            return None
        bits = list(map(bits_of.__getitem__, dtypes))  # KeyError: unknown; TypeError: unhashable
        sizes = list(map(_sub, ends, begins))
        # in file order and not overlapping (then begins[0] is the least
        # begin and ends[-1] the greatest end); empty tensors anywhere else,
        # and any other order, go to the per-entry checks, which sort
        if begins[0] < 0 or min(sizes) < 0 or ends[-1] > data_len:
            return None
        if not all(map(_ge, itertools.islice(begins, 1, None), ends)):
            return None
        if list(map(_mul, map(math.prod, shapes), bits)) != list(map(_mul, sizes, _repeat(8))):
            return None
    except (KeyError, TypeError, IndexError):
        return None
    return Table(names, dtypes, shapes, begins, ends)


def _table_np(np, names, dtypes, shapes, offs, bits_of, data_len) -> Optional[Table]:
    """table()'s checks with the offsets and sizes as int64 arrays: the
    same checks, each one array operation instead of a pass in Python."""
    try:
        flat = list(_chain(offs))
        dims = list(_chain(shapes))
        # bool is not int here: type() is exact, as the per-entry checks
        if set(map(type, flat)) != {int} or (dims and set(map(type, dims)) != {int}):
            return None
        if dims and min(dims) < 0:
            return None
        kinds = list(set(dtypes))
        bits_k = list(map(bits_of.__getitem__, kinds))  # KeyError: unknown; TypeError: unhashable
        o = np.array(flat, dtype=np.int64)  # OverflowError: past int64, past any file
        b, e = o[0::2], o[1::2]
        sizes = e - b
        # in file order and not overlapping, as table()
        if b[0] < 0 or sizes.min() < 0 or e[-1] > data_len or (b[1:] < e[:-1]).any():
            return None
        nd = list(map(len, shapes))
        all1d = nd.count(1) == len(nd)
        numel = np.array(dims if all1d else list(map(math.prod, shapes)), dtype=np.int64)
        codes = None
        if len(kinds) == 1:
            bits = bits_k[0]
        else:
            codes = np.array(list(map({k: i for i, k in enumerate(kinds)}.__getitem__, dtypes)), dtype=np.int64)
            bits = np.array(bits_k, dtype=np.int64)[codes]
        # every dtype has >= 4 bits: a right numel is <= 2 * size, and the
        # products below stay far from int64's limit
        if (numel > 2 * sizes).any() or not np.array_equal(numel * bits, sizes * 8):
            return None
    except (KeyError, TypeError, IndexError, OverflowError):
        return None
    tab = Table(names, dtypes, shapes, flat[0::2], flat[1::2])
    tab.b_np, tab.e_np, tab.kinds, tab.codes = b, e, kinds, codes
    tab.numel1d = numel if all1d else None
    return tab


def groups(tab: Table, itemsize_of) -> Tuple[Dict[str, List[int]], List[int]]:
    """({dtype: [indices of its tensors that are non-empty and aligned, in
    file order]}, [indices of the others: empty or misaligned]). The
    indices are int64 arrays where the table has NumPy's."""
    if tab.b_np is not None:
        return _groups_np(tab, itemsize_of)
    dts, b, e = tab.dtypes, tab.begins, tab.ends
    n = len(dts)
    kinds = set(dts)
    if len(kinds) == 1:
        by = {dts[0]: list(range(n))} if n else {}
    else:
        by = {d: list(_compress(range(n), map(d.__eq__, dts))) for d in kinds}
    odd: List[int] = []
    empty = set(_compress(range(n), map(operator.eq, b, e))) if any(map(operator.eq, b, e)) else set()
    for d, idx in by.items():
        isz = itemsize_of(d)
        bad = empty.intersection(idx) if empty else set()
        if isz > 1 and any(map(isz.__rmod__, map(b.__getitem__, idx))):
            bad |= {i for i in idx if b[i] % isz and i not in empty}
        if bad:
            by[d] = [i for i in idx if i not in bad]
            odd += sorted(bad)
    return {d: idx for d, idx in by.items() if idx}, odd


def _groups_np(tab: Table, itemsize_of):
    np = _numpy()
    b, e = tab.b_np, tab.e_np
    if tab.codes is None:
        by = {tab.kinds[0]: np.arange(len(b))}
    else:
        by = {d: np.flatnonzero(tab.codes == i) for i, d in enumerate(tab.kinds)}
    empty = b == e
    if not empty.any():
        empty = None
    odd: List[int] = []
    for d, idx in by.items():
        isz = itemsize_of(d)
        bad = b[idx] % isz != 0 if isz > 1 else None
        if empty is not None:
            bad = empty[idx] if bad is None else bad | empty[idx]
        if bad is not None and bad.any():
            odd += idx[bad].tolist()
            by[d] = idx[~bad]
    return {d: idx for d, idx in by.items() if len(idx)}, sorted(odd)


def _items(tab: Table, idx, isz: int, ends: bool) -> List[int]:
    """The begins (or ends) of the tensors idx, in items of isz bytes."""
    if tab.b_np is not None:
        return ((tab.e_np if ends else tab.b_np)[idx] // isz).tolist()
    v = tab.ends if ends else tab.begins
    if len(idx) == len(v) and isz == 1:  # idx is range(len): no indirection
        return v
    return list(map(isz.__rfloordiv__, map(v.__getitem__, idx)))


def _strides(shape) -> Tuple[int, ...]:
    out, acc = [], 1
    for d in reversed(shape):
        out.append(acc)
        acc *= d
    return tuple(reversed(out))


def views_torch(torch, buf, tab: Table, idx: List[int], dt, isz: int, shape_of) -> List[Any]:
    """Views of buf (uint8) for the tensors idx of one dtype. Tensors one
    after another with few of them not 1-D: one split_with_sizes (its
    pieces are made in C++); the tensors of one shape evenly spaced: one
    as_strided + unbind; otherwise one as_strided each, shape and all."""
    n = buf.numel() - buf.numel() % isz
    typed = buf[:n].view(dt) if dt != torch.uint8 else buf[:n]
    if tab.numel1d is not None and shape_of is None and len(idx) > 1:
        # every tensor 1-D: equal lengths at evenly spaced offsets, seen
        # with array operations (no list per tensor), are one unbind
        bi, ne = tab.b_np[idx] // isz, tab.numel1d[idx]
        d, n0 = int(bi[1] - bi[0]), int(ne[0])
        if d >= max(n0, 1) and (ne == n0).all() and (bi[1:] - bi[:-1] == d).all():
            return list(typed.as_strided((len(idx), n0), (d, 1), int(bi[0])).unbind(0))
    il = _ilist(tab, idx)
    b = _items(tab, idx, isz, False)
    shapes = tab.shapes if il is None else list(map(tab.shapes.__getitem__, il))
    if shape_of is not None:
        shapes = list(map(shape_of, _names(tab, idx), shapes))
    e0 = tab.ends[int(idx[0])] // isz
    if b[0] == 0 and (len(b) == 1 or b[1] == e0):  # maybe back to back: the split
        e = _items(tab, idx, isz, True)
        not_1d = list(_compress(range(len(idx)), map((1).__ne__, map(len, shapes))))
        if b[1:] == e[:-1] and len(not_1d) * 4 <= len(idx):
            numel = list(map(_sub, e, b))
            tail = n // isz - e[-1]
            vs = list(typed.split_with_sizes(numel + [tail] if tail else numel)[: len(idx)])
            for k in not_1d:
                vs[k] = vs[k].view(shapes[k])
            return vs
    if shapes.count(shapes[0]) == len(shapes):  # one shape (a list compare, no tuples made)
        s = tuple(shapes[0])
        return _same_shape(typed, s, _strides(s), b)
    shapes_t = list(map(tuple, shapes))
    kinds = set(shapes_t)
    strides = {s: _strides(s) for s in kinds}
    if len(kinds) * 8 > len(idx):
        return list(map(typed.as_strided, shapes_t, map(strides.__getitem__, shapes_t), b))
    # few shapes: the tensors of one shape at evenly spaced offsets (layer
    # after layer of the same layout) are one as_strided + unbind
    vs: List[Any] = [None] * len(idx)
    for s in kinds:
        pos = list(_compress(range(len(idx)), map(s.__eq__, shapes_t)))
        list(map(vs.__setitem__, pos, _same_shape(typed, s, strides[s], list(map(b.__getitem__, pos)))))
    return vs


def _same_shape(typed, s, strides, bs: List[int]) -> List[Any]:
    """Views of shape s at offsets bs (in items) of typed: evenly spaced
    ones (layer after layer of one layout) are one as_strided + unbind."""
    d = bs[1] - bs[0] if len(bs) > 1 else 0
    if d >= max(math.prod(s), 1) and bs == list(range(bs[0], bs[0] + d * len(bs), d)):
        return list(typed.as_strided((len(bs),) + s, (d,) + strides, bs[0]).unbind(0))
    return list(map(typed.as_strided, _repeat(s), _repeat(strides), bs))


def _ilist(tab: Table, idx) -> Optional[List[int]]:
    """idx as a list of ints; None when it is every tensor in order."""
    if len(idx) == len(tab.names):
        return None
    return idx.tolist() if hasattr(idx, "tolist") else idx


def _names(tab: Table, idx):
    il = _ilist(tab, idx)
    return tab.names if il is None else map(tab.names.__getitem__, il)


def views_numpy(np, buf, tab: Table, idx: List[int], dt, shape_of) -> List[Any]:
    """Views of buf (uint8 ndarray) for the tensors idx of one dtype."""
    il = _ilist(tab, idx)
    shapes = tab.shapes if il is None else list(map(tab.shapes.__getitem__, il))
    if shape_of is not None:
        shapes = list(map(shape_of, _names(tab, idx), shapes))
    offs = _items(tab, idx, 1, False)
    shapes_t = list(map(tuple, shapes))
    kinds = set(shapes_t)
    if len(kinds) * 8 > len(idx):
        return list(map(np.ndarray, shapes_t, _repeat(dt), _repeat(buf), offs))
    vs: List[Any] = [None] * len(idx)  # as views_torch: evenly spaced ones in one go
    for s in kinds:
        pos = list(_compress(range(len(idx)), map(s.__eq__, shapes_t))) if len(kinds) > 1 else list(range(len(idx)))
        bs = list(map(offs.__getitem__, pos))
        d = bs[1] - bs[0] if len(bs) > 1 else 0
        # (not 0-d: iterating a 1-D array gives scalars, copies, not views)
        if s and len(bs) > 1 and d >= math.prod(s) * dt.itemsize and list(map(_sub, bs[1:], bs[:-1])).count(d) == len(bs) - 1:
            st = tuple(x * dt.itemsize for x in _strides(s))
            views = list(np.ndarray((len(bs),) + s, dt, buf, bs[0], (d,) + st))
        else:
            views = map(np.ndarray, _repeat(s), _repeat(dt), _repeat(buf), bs)
        list(map(vs.__setitem__, pos, views))
    return vs


def head_url(f, max_header: int) -> bytes:
    """The 8-byte length and the header of a URL source (no size known)."""
    first = bytearray(8)
    got = f.read(first, 8, 0)
    head = bytes(first[:got])
    if got == 8:
        (n,) = struct.unpack("<Q", head)
        if n <= max_header:
            rest = bytearray(n)
            head += bytes(rest[: f.read(rest, n, 8)])
    return head


def load_all(st, path: str, devices: List[Any], framework: str, piece_size: int, copy: bool) -> List[Dict[str, Any]]:
    """Every tensor of one file, one dict per device of devices (st: the
    safetensors module, for its checks and dtypes).

    A local file: the read of the whole data region starts as soon as the
    header's length is known, and the header is parsed and the views made
    while it runs. Several devices: the data region is read once and
    placed on every device (File.read_fanout), in a thread while the header
    is parsed. A URL source (rados://...) has no size to read against
    before the header is parsed, so it reads after, up to the last tensor.
    """
    from . import _stindex  # (it imports this module)

    clock = time.perf_counter
    t0 = clock()
    url = is_url(path)
    head, size = st._read_head(path)
    n = struct.unpack("<Q", head[:8])[0] if len(head) >= 8 else 0
    data_len = size - 8 - n if len(head) == 8 + n and not url else 0
    torch = np = None
    if framework == "torch":
        import torch
    else:
        import numpy as np
    bufs = [st._alloc(framework, d, data_len) for d in devices]
    early = READ_FIRST and data_len
    waiter = _start_read(path, bufs, data_len, 8 + n, piece_size) if early and not READ_AFTER_INDEX else None
    t1 = clock()
    try:
        tab = None
        if len(head) == 8 + n and n <= st.MAX_HEADER_SIZE:  # (else _header says what is wrong)
            tab = _stindex.table(head, n, size - 8 - n, st._BITS)  # None: the Python parser decides
        parser = "c" if tab is not None else "orjson" if _orjson is not None else "json"
        if tab is None:
            _, hdr, _meta = st._header(path, head, size)
        t2 = clock()
        if tab is None:
            tab = table(hdr, st._BITS, size - 8 - n)
        if tab is None:  # the per-entry checks: the exact error, or tensors out of file order
            sel = list(st._parse(path, head, size)[1].values())
            tab = Table([t.name for t in sel], [t.dtype for t in sel], [list(t.shape) for t in sel],
                        [t.begin for t in sel], [t.end for t in sel])  # fmt: skip
        if url:
            data_len = max(tab.ends, default=0)
            bufs = [st._alloc(framework, d, data_len) for d in devices]
            waiter = _start_read(path, bufs, data_len, 8 + n, piece_size) if data_len else None
        if early and READ_AFTER_INDEX and not url:
            waiter = _start_read(path, bufs, data_len, 8 + n, piece_size)
        by, odd = groups(tab, st._itemsize)
        if torch is not None:
            for name in tab.kinds if tab.kinds is not None else set(tab.dtypes):  # a dtype this torch lacks fails here
                st._torch_dtype(torch, name)
        t3 = clock()
        with _untracked(torch):
            outs = [_views(st, torch, np, buf, tab, by) for buf in bufs]
        if data_len and not early and not url:
            waiter = _start_read(path, bufs, data_len, 8 + n, piece_size)
    except BaseException:
        if waiter is not None:
            waiter(False)  # the buffers stay alive until the read is done
        raise
    t4 = clock()
    if waiter is not None:
        got = waiter(True)
        if got != data_len:
            raise st.HeaderError("%s: expected %d bytes of tensor data, read %d (file truncated?)" % (path, data_len, got))
    t5 = clock()
    if odd:  # empty or misaligned: their own allocations, after the read
        sel = [st.TensorInfo(tab.names[i], tab.dtypes[i], tuple(tab.shapes[i]), tab.begins[i], tab.ends[i],
                             st._itemsize(tab.dtypes[i])) for i in odd]  # fmt: skip
        offs = [t.begin for t in sel]
        for buf, out in zip(bufs, outs):
            if torch is not None:
                out.update(st._tensors_torch(torch, buf.device, buf, sel, offs, copy))
            else:
                out.update(st._tensors_numpy(np, buf, sel, offs, copy))
    t6 = clock()
    last_phases.update(head=t1 - t0, json=t2 - t1, table=t3 - t2, views=t4 - t3, wait=t5 - t4, odd=t6 - t5,
                       tensors=len(tab.names), parser=parser)  # fmt: skip
    if copy:
        odd_names = {tab.names[i] for i in odd}
        for out in outs:
            for k, v in out.items():
                if k not in odd_names:
                    out[k] = st._clone(torch, v) if torch is not None else v.copy()
    last_phases["copy"] = clock() - t6
    return outs


def _views(st, torch, np, buf, tab: Table, by: Dict[str, List[int]]) -> Dict[str, Any]:
    """{name: view of buf} for the tensors of by, in the header's order
    (names of the tensors not in by map to None until the caller sets them)."""
    def group(name, idx):
        shape_of = _f4_shape(st) if name == "F4" else None
        if torch is not None:
            dt = st._torch_dtype(torch, name)
            return views_torch(torch, buf, tab, idx, dt, st._itemsize(name), shape_of)
        return views_numpy(np, buf, tab, idx, st._numpy_dtype(np, name), shape_of)

    idxs, vals = [], []
    threads = _view_threads()
    if torch is not None and threads > 1 and len(by) > 1 and len(tab.names) >= 4096:
        groups_vs = _threaded(torch, group, list(by.items()), threads)
    else:
        groups_vs = [group(name, idx) for name, idx in by.items()]
    for idx, vs in zip(by.values(), groups_vs):
        idxs.append(idx)
        vals += vs
    n = len(tab.names)
    if len(vals) == n and (len(idxs) == 1 or (tab.b_np is not None and n > 1)):
        if len(idxs) > 1:  # the groups' views back in the header's order, in C
            vals = _in_order(idxs, groups_vs, vals, n)
        return dict(zip(tab.names, vals))
    out: Dict[str, Any] = dict.fromkeys(tab.names)
    at = 0
    for idx in idxs:
        out.update(zip(_names(tab, idx), vals[at : at + len(idx)]))
        at += len(idx)
    return out


def _in_order(idxs, groups_vs, vals, n: int):
    """The groups' views (vals: group after group) in the header's order.
    Groups whose indices are evenly spaced (dtypes taking turns, layer
    after layer) go in by one slice assignment each; any other order by a
    sort of all the indices."""
    np = _numpy()
    out: List[Any] = [None] * n
    for idx, vs in zip(idxs, groups_vs):
        step = int(idx[1] - idx[0]) if len(idx) > 1 else 1
        if step < 1 or (len(idx) > 2 and not (np.diff(idx) == step).all()):
            order = np.argsort(np.concatenate(idxs), kind="stable").tolist()
            return operator.itemgetter(*order)(vals)
        at = int(idx[0])
        out[at : at + step * (len(idx) - 1) + 1 : step] = vs
    return out


#: True: a local file's data read starts before the tensors are made (and,
#: with READ_AFTER_INDEX False, before its header is parsed) and runs while
#: they are made (the default). False: it starts after
#: them, so the parsing does not share the memory system with the read's
#: copies (python/bench_many_tensors.py's loader "opends-parsefirst"
#: measures both orders on the same machine).
READ_FIRST = True

#: With READ_FIRST: True (the default) starts the read once the header is
#: indexed (before the views are made) instead of before it is parsed, so
#: that the parse does not share the CPUs with the read's copies: on the
#: H200 host 20,000 tensors loaded at 0.60x one file of the same bytes
#: against 0.55x with the read started first (probe of main 37f0bd1,
#: loaders "opends-readafterindex" / "opends"); a header of few tensors is
#: indexed in well under a millisecond. python/bench_many_tensors.py's
#: loader "opends-readfirst" measures the other order.
READ_AFTER_INDEX = True

#: Threads that make a big file's views, a dtype each; 0 or 1: the calling
#: thread makes them all; None (the default): 4 where this process may run
#: on 8 or more cores, else 0. torch makes views with the GIL released, so
#: the dtypes' views are made at once on a host with cores to spare (the
#: data read's threads run meanwhile); on a busy 2-core machine it was
#: slower. python/bench_many_tensors.py's loaders "opends-threads" and
#: "opends-nothreads" measure both.
VIEW_THREADS: Optional[int] = None


def _view_threads() -> int:
    if VIEW_THREADS is not None:
        return VIEW_THREADS
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        cores = os.cpu_count() or 1
    return 4 if cores >= 8 else 0


def _threaded(torch, group, items, threads: int):
    """[group(name, idx) for (name, idx) in items], up to threads at
    once (fresh threads: a pool's would not survive a fork), each thread
    below autograd's view tracking as the caller is (it is per thread)."""
    out: List[Any] = [None] * len(items)

    def run(lo):
        try:
            with _untracked(torch):
                for k in range(lo, len(items), threads):
                    out[k] = group(*items[k])
        except BaseException as e:  # handed to the caller
            out[lo] = e

    ts = [threading.Thread(target=run, args=(k,), name="opends-views", daemon=True)
          for k in range(1, min(threads, len(items)))]  # fmt: skip
    for t in ts:
        t.start()
    run(0)
    for t in ts:
        t.join()
    for r in out:
        if isinstance(r, BaseException):
            raise r
    return out


#: Seconds spent in each phase of the last load_all (python/bench_many_tensors.py
#: prints them): head (the header's bytes read, the data read started), json
#: (parse; "parser" says which: "c" for the C indexer), table (checks,
#: grouping), views (tensor objects), wait (for the data read still
#: running), odd (misaligned/empty tensors), copy (copy=True).
last_phases: Dict[str, Any] = {}


def _untracked(torch):
    """The views made without autograd's view tracking (the ADInplaceOrView
    dispatch key): a third of each view's cost. Each tensor covers its own
    bytes, no other tensor's, so one tensor's in-place change has nothing
    to tell the others (their version counters are their own, as
    safetensors' separate tensors' are); ``t._base`` is None, as there."""
    below = getattr(getattr(torch, "_C", None), "_AutoDispatchBelowADInplaceOrView", None)
    return below() if below is not None else contextlib.nullcontext()


def _f4_shape(st):
    return lambda name, s: st._storage_shape(st.TensorInfo(name, "F4", tuple(s), 0, 0, 1))


def _start_read(path: str, bufs: List[Any], size: int, offset: int, piece_size: int):
    """Start reading [offset, offset + size) of path into every buffer of
    bufs; return wait(ok) -> bytes read (ok False: wait, never raise)."""
    f = File(path, "r")
    if len(bufs) == 1:
        try:
            fut = f.pread(bufs[0], size, offset, piece_size)
        except BaseException:
            f.close()
            raise

        def wait(ok: bool) -> int:
            try:
                if not ok:
                    fut.exception()
                    return 0
                return fut.result()
            finally:
                f.close()

        return wait
    box: List[Any] = []

    def run():
        try:
            box.append(f.read_fanout(bufs, size, offset))
        except BaseException as e:  # handed to the waiting thread
            box.append(e)

    t = threading.Thread(target=run, name="opends-fanout", daemon=True)
    t.start()

    def wait_fanout(ok: bool) -> int:
        t.join()
        f.close()
        r = box[0]
        if isinstance(r, BaseException):
            if ok:
                raise r
            return 0
        return r

    return wait_fanout
