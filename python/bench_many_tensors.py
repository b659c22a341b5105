#!/usr/bin/env python3
"""Per-tensor cost of opends.safetensors.load_file: a file of many small
tensors against one file of the same bytes in a single tensor, both hot (in
the page cache). Prints GB/s of each and the ratio many/one (the goal is
>= 0.5), and, where importable, the same for safetensors and fastsafetensors.

    python3 python/bench_many_tensors.py                          # CPU, NumPy or torch
    python3 python/bench_many_tensors.py --device cuda:0 --loaders opends,safetensors,fastsafetensors \
        --out many.csv && bench/report --add-safetensors many.csv RESULTS_DIR

Loader "opends-parsefirst" is opends with the data read started after the
header is parsed and the tensors made instead of before (opends._stfast.
READ_FIRST = False): its phases show the parse without a read running.
For opends, a line per file gives the median milliseconds of each phase
of the load (header read, JSON parse, checks, tensor creation, waiting for
the data read) and the parser used (orjson where importable).
Loaders "opends-threads" and "opends-nothreads" make the views of each
dtype in threads of their own or all in the caller's (opends._stfast.
VIEW_THREADS = 4 or 0; "opends" decides by the cores it may use),
"opends-pyparse" parses the header in Python instead of with the C indexer
(opends._stindex.ENABLED = False), "opends-onepass" with the C indexer in
one pass (the calling thread on one CPU for it) instead of in parts,
"opends-readafterindex" starts the data read once the header is indexed
(opends._stfast.READ_AFTER_INDEX = True, the default), "opends-readfirst"
before the header is parsed (READ_AFTER_INDEX = False).

Files are written once into --dir (default $TMPDIR or /tmp) and kept.
--out writes one CSV row per loader and file (the columns of
python/bench_safetensors.py's CSV, which bench/report --add-safetensors
ingests, with cache "hot-one" / "hot-many" so they stay apart from P7's
rows, plus tensors and ratio = many/one by medians). equal says whether
the loader's tensors equal the first loader's, byte for byte.
"""
import argparse
import csv
import gc
import json
import os
import statistics
import struct
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

DTYPES = [("F16", 2), ("BF16", 2), ("F32", 4), ("U8", 1)]


def write(path, tensors):
    """tensors: [(name, dtype, shape, nbytes)]; data is a repeating byte pattern."""
    header, off = {}, 0
    for name, dt, shape, nb in tensors:
        header[name] = {"dtype": dt, "shape": shape, "data_offsets": [off, off + nb]}
        off += nb
    hb = json.dumps(header).encode()
    hb += b" " * (-len(hb) % 8)
    block = bytes(range(256)) * 4096
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hb)) + hb)
        left = off
        while left:
            n = min(left, len(block))
            f.write(block[:n])
            left -= n


def make(dirname, count, size):
    many = os.path.join(dirname, "opends_many_%d_x_%d.safetensors" % (count, size))
    one = os.path.join(dirname, "opends_one_%d.safetensors" % (count * size))
    if not os.path.exists(many):
        ts = []
        for i in range(count):
            dt, isz = DTYPES[i % len(DTYPES)]
            ts.append(("layers.%d.w" % i, dt, [size // isz], size))
        write(many, ts)
    if not os.path.exists(one):
        write(one, [("all", "U8", [count * size], count * size)])
    return many, one


def warm(path):
    with open(path, "rb") as f:
        while f.read(64 << 20):
            pass


def loaders(names, device, framework):
    out = {}
    if "opends" in names:
        from opends.safetensors import load_file

        out["opends"] = lambda p: load_file(p, device=device, framework=framework)
    # opends with one module setting changed for the load: the data read
    # started after the header's parse and views; the views of each dtype
    # made in threads of their own, or all by the caller; the header parsed
    # in Python (the C indexer off)
    variants = {"opends-parsefirst": ("_stfast", "READ_FIRST", False), "opends-threads": ("_stfast", "VIEW_THREADS", 4),
                "opends-nothreads": ("_stfast", "VIEW_THREADS", 0), "opends-pyparse": ("_stindex", "ENABLED", False),
                "opends-onepass": ("_stindex", "table", _one_cpu),
                "opends-readafterindex": ("_stfast", "READ_AFTER_INDEX", True),
                "opends-readfirst": ("_stfast", "READ_AFTER_INDEX", False)}
    for label, (mod, attr, value) in variants.items():
        if label in names:
            out[label] = _variant(mod, attr, value, device, framework)
    if "safetensors" in names:
        try:
            if framework == "numpy":
                from safetensors.numpy import load_file as st_np

                out["safetensors"] = st_np
            else:
                from safetensors.torch import load_file as st_pt

                out["safetensors"] = lambda p: st_pt(p, device=str(device))
        except ImportError:
            print("safetensors not importable: skipped")
    if "fastsafetensors" in names and framework == "torch":
        try:
            import torch
            from fastsafetensors import SafeTensorsFileLoader, SingleGroup

            def fst(p):
                dev = torch.device(device)
                ld = SafeTensorsFileLoader(SingleGroup(), dev, nogds=True)
                ld.add_filenames({0: [p]})
                fb = ld.copy_files_to_device()
                out = {k: fb.get_tensor(k) for k in fb.key_to_rank_lidx}
                if dev.type == "cuda":
                    torch.cuda.synchronize()
                fb.close()
                ld.close()
                return out

            out["fastsafetensors"] = fst
        except ImportError:
            print("fastsafetensors not importable: skipped")
    return out


def _one_cpu(table):
    """table (opends._stindex.table) called with this thread on one CPU:
    the C indexer then parses a big header in one pass, not in parts
    (st_index.c splits by the CPUs the calling thread may use)."""

    def one_pass(*args):
        cpus = os.sched_getaffinity(0)
        os.sched_setaffinity(0, {min(cpus)})
        try:
            return table(*args)
        finally:
            os.sched_setaffinity(0, cpus)

    return one_pass


def _variant(mod, attr, value, device, framework):
    import importlib

    from opends.safetensors import load_file

    m = importlib.import_module("opends." + mod)
    if callable(value):  # a wrapper of the module's attribute
        value = value(getattr(m, attr))

    def load(p):
        was = getattr(m, attr)
        setattr(m, attr, value)
        try:
            return load_file(p, device=device, framework=framework)
        finally:
            setattr(m, attr, was)

    return load


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--count", type=int, default=20000, help="tensors in the many-tensor file")
    ap.add_argument("--size", type=int, default=16384, help="bytes per tensor")
    ap.add_argument("--dir", default=os.environ.get("TMPDIR", "/tmp"))
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--framework", default=None, help="torch or numpy (default torch when importable)")
    ap.add_argument("--loaders", default="opends,safetensors")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--out", default=None, help="CSV of the rows (see above)")
    args = ap.parse_args()
    fw = args.framework
    if fw is None:
        try:
            import torch  # noqa: F401

            fw = "torch"
        except ImportError:
            fw = "numpy"
    sync = lambda: None  # noqa: E731
    if args.device.startswith("cuda"):
        import torch

        sync = torch.cuda.synchronize
    many, one = make(args.dir, args.count, args.size)
    total = args.count * args.size
    print("%d tensors x %d bytes = %.1f MB; framework %s, device %s" % (args.count, args.size, total / 1e6, fw, args.device))
    rows, ref = [], {}
    for name, load in loaders(args.loaders.split(","), args.device, fw).items():
        try:
            rates, equal = measure(name, load, args, one, many, total, ref, sync)
        except Exception as e:  # one loader failing leaves the others' rows
            print("  %-16s failed: %s: %s" % (name, type(e).__name__, str(e).splitlines()[0] if str(e) else ""))
            continue
        ratio = rates["many"][0] / rates["one"][0]
        print("  %-16s many/one = %.2f by medians, %.2f by best runs" % (name, ratio, rates["many"][1] / rates["one"][1]))
        for label in ("one", "many"):
            rows.append(dict(loader=name, cache="hot-" + label, bytes=total, runs=args.runs,
                             best_s="%.6f" % rates[label][3], median_s="%.6f" % rates[label][2],
                             best_GBps="%.3f" % rates[label][1], equal=equal[label], backend=backend(name),
                             tensors=args.count if label == "many" else 1, ratio="%.3f" % ratio))
    if args.out and rows:
        with open(args.out, "w", newline="") as fp:
            w = csv.DictWriter(fp, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)
        print("wrote %s" % args.out)


def measure(name, load, args, one, many, total, ref, sync):
    """Time load on the one-tensor and the many-tensor file; print a line
    each (bench/report parses these lines: keep their format)."""
    rates, equal = {}, {}
    for label, path in (("one", one), ("many", many)):
        warm(path)
        times, phases = [], []
        for _ in range(args.runs):
            gc.collect()
            sync()
            t0 = time.perf_counter()
            out = load(path)
            sync()
            times.append(time.perf_counter() - t0)
            if name.startswith("opends"):
                from opends import _stfast

                phases.append(dict(_stfast.last_phases))
            if _ < args.runs - 1:
                del out
        if label not in ref:
            ref[label] = out
            equal[label] = True
        else:
            equal[label] = same(ref[label], out)
        del out
        med = statistics.median(times)
        rates[label] = (total / med / 1e9, total / min(times) / 1e9, med, min(times))
        print(
            "  %-16s %-4s median %.4f s  %.2f GB/s  (best %.4f s, %.2f GB/s)%s"
            % (name, label, med, rates[label][0], min(times), rates[label][1],
               "" if equal[label] else "  NOT EQUAL to the first loader's")
        )
        if phases:
            print_phases(name, label, phases)
    return rates, equal


PHASES = ("head", "json", "table", "views", "wait", "odd", "copy")


def print_phases(name, label, phases):
    """Where opends' time went (opends._stfast.last_phases, median of each
    over the runs): head = header bytes read + data read started, json =
    header parse (which parser), table = checks and grouping, views = the
    tensor objects, wait = for the data read still running after all that,
    odd/copy = misaligned or empty tensors / copy=True. The data read runs
    during json, table and views."""
    med = {k: statistics.median(p.get(k, 0.0) for p in phases) * 1e3 for k in PHASES}
    tensors = phases[-1].get("tensors", 0)
    cpu = med["json"] + med["table"] + med["views"]
    print("  %-16s %-4s phases (median ms): %s; parser %s; json+table+views %.3f us per tensor"
          % (name, label, "  ".join("%s %.2f" % (k, med[k]) for k in PHASES), phases[-1].get("parser", "?"),
             cpu * 1e3 / tensors if tensors else 0.0))


def backend(name):
    if not name.startswith("opends"):
        return ""
    import opends

    return opends.backend()


def same(a, b):
    """The same names, and each tensor's bytes equal (on its device)."""
    if set(a) != set(b):
        return False
    for k in a:
        x, y = a[k], b[k]
        if hasattr(x, "numpy") and hasattr(y, "numpy"):  # torch
            import torch

            if x.dtype != y.dtype or x.shape != y.shape:
                return False
            if x.device != y.device:
                y = y.to(x.device)
            if not torch.equal(x.contiguous().view(-1).view(torch.uint8), y.contiguous().view(-1).view(torch.uint8)):
                return False
        else:
            if x.dtype != y.dtype or x.shape != y.shape or x.tobytes() != y.tobytes():
                return False
    return True


if __name__ == "__main__":
    main()
