#!/usr/bin/env python3
"""KvikIO peer baseline for opends-bench: the same datasets and legs through
RAPIDS KvikIO, appended to the same records.csv (backend "kvikio").
opends-bench --kvikio bench/kvikio_bench.py runs it in the same command.

    python3 bench/kvikio_bench.py --data DIR --out DIR --datasets a,b --cache cold,hot \
        [--callers seq16m,files1t,rand4k,write16m,write8t,gpu1,dev1,gpu2 --big-size BYTES]

Caller legs (one calling thread, hot, into GPU memory; docs/bench.md
"Callers"): each at KvikIO's default thread count and at its best of a small
sweep, both recorded (config says which).

KvikIO's Python API has sync reads (CuFile.read), futures (CuFile.pread) and
stream reads (raw_read_async, where cuFile's stream API works); it has no
batch API, so batch cells stay n/a. Its thread count and task size are tuned
first on each dataset (best of a small grid, hot cache), so the comparison
is with KvikIO at its best on this machine, as OpenDS is.

--compat (default ON) sets KVIKIO_COMPAT_MODE. Without nvidia-fs, KvikIO's
AUTO mode still goes through cuFile once cuFile can register the files,
and cuFile's compatibility mode reads with O_DIRECT, past the page cache:
on the H200 hot reads then ran at disk speed (1.7 GB/s) where KvikIO's own
POSIX pool (ON) reached 37 GB/s. Cold, the two were alike.
"""
import argparse
import concurrent.futures as cf
import csv
import datetime
import os
import random
import sys
import threading
import time

import numpy as np

DATASETS = ["filesize8gib", "tiktokish", "imagenetish", "lmcacheish"]
CONCURRENCY = {"filesize8gib": 1, "tiktokish": 26, "imagenetish": 4096, "lmcacheish": 26}
COLUMNS = ("date,commit,dataset,mode,backend,cache,bytes,seconds,mib_s,cpu_s,cpu_s_gib,files,files_s,p50_us,p99_us,"
           "threads,concurrency,call_size,repeats,mib_s_min,mib_s_max,io_threads,queue_depth,chunk_size,mem,"
           "config,verified,error").split(",")
CALL = 16 << 20
M1, M2, M3 = np.uint64(0xbf58476d1ce4e5b9), np.uint64(0x94d049bb133111eb), np.uint64(0x9e3779b97f4a7c15)


def mix64(z):
    z = (z ^ (z >> np.uint64(30))) * M1
    z = (z ^ (z >> np.uint64(27))) * M2
    return z ^ (z >> np.uint64(31))


def seed_of(rel):
    h = 0xcbf29ce484222325
    for b in rel.encode():
        h = ((h ^ b) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return int(mix64(np.array([h], dtype=np.uint64))[0])


def expected(seed, n, off=0):
    """Bytes [off, off+n) of a file with this seed (the generator of
    tools/bench/dataset.c, vectorised)."""
    first = off // 8
    words = (off + n + 7) // 8 - first
    with np.errstate(over="ignore"):
        w = np.arange(first, first + words, dtype=np.uint64)
        v = mix64(np.uint64(seed) + w * M3)
    skip = off - first * 8
    return v.astype("<u8").view(np.uint8)[skip:skip + n]


def files_of(root):
    out = []
    for dirpath, _, names in os.walk(root):
        for n in names:
            if n.startswith("."):
                continue
            p = os.path.join(dirpath, n)
            out.append((p, os.path.relpath(p, root), os.path.getsize(p)))
    out.sort()
    return out


def drop_caches(files, cold):
    if cold:
        os.sync()
        try:
            with open("/proc/sys/vm/drop_caches", "w") as f:
                f.write("3")
            return
        except OSError:
            for p, _, _ in files:
                fd = os.open(p, os.O_RDONLY)
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                os.close(fd)
    else:
        for p, _, _ in files:
            if all_cached(p):
                continue  # reading 8 GiB again costs 2-3 s per leg
            with open(p, "rb") as f:
                while f.read(4 << 20):
                    pass


def all_cached(path):
    """Whether every page of path is in the page cache (mincore of a
    mapping); False when that cannot be told."""
    import ctypes
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.mmap.restype = ctypes.c_void_p
        libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                              ctypes.c_long]
        libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
        libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
        size = os.path.getsize(path)
        if size == 0:
            return True
        page = os.sysconf("SC_PAGE_SIZE")
        fd = os.open(path, os.O_RDONLY)
        try:
            addr = libc.mmap(None, size, 1, 1, fd, 0)  # PROT_READ, MAP_SHARED
        finally:
            os.close(fd)
        if addr in (None, ctypes.c_void_p(-1).value):
            return False
        try:
            vec = (ctypes.c_ubyte * ((size + page - 1) // page))()
            if libc.mincore(addr, size, vec) != 0:
                return False
            return all(b & 1 for b in bytes(vec))
        finally:
            libc.munmap(addr, size)
    except (OSError, AttributeError, ValueError):
        return False


def cpu():
    t = os.times()
    return t.user + t.system


def leg_wanted(a, ds, mode, cache):
    """--legs DATASET:MODE:CACHE items ('*' any), as opends-bench reads them"""
    if not a.legs:
        return True
    for item in a.legs.split(","):
        f = item.split(":")
        if len(f) == 3 and all(p in ("*", v) for p, v in zip(f, (ds, mode, cache))):
            return True
    return False


def leg_order(n):
    """The legs' file order of tools/bench/output.c leg_order()."""
    order, st = list(range(n)), 0x5eed
    for i in range(n, 1, -1):
        st = (st * 6364136223846793005 + 1442695040888963407) & 0xFFFFFFFFFFFFFFFF
        j = (st >> 33) % i
        order[i - 1], order[j] = order[j], order[i - 1]
    return order


def row(base, **kw):
    r = dict(base)
    r.update(kw)
    b, secs = int(r.get("bytes", 0)), float(r.get("seconds", 0) or 0)
    r.setdefault("mib_s", f"{b / 2**20 / secs if secs and not r.get('error') else 0:.1f}")
    r["cpu_s_gib"] = f"{float(r.get('cpu_s', 0)) / (b / 2**30) if b else 0:.3f}"
    r.setdefault("mib_s_min", r["mib_s"])
    r.setdefault("mib_s_max", r["mib_s"])
    return r

default_ts = 4 << 20  # KvikIO's task size when imported (set in main)
SWEEP = (8, 32)  # the thread counts tried for "best", beside KvikIO's own default


def big_file(a):
    name = "filesize8gib" if a.big_size == 8 << 30 else f"big{a.big_size >> 20}m"
    root = os.path.join(a.data, name)
    rel = "class001/sample_000000.bin"
    return os.path.join(root, rel), seed_of(rel), a.big_size


def check(cupy, buf, seed, n, base_off=0, windows=8):
    """windows of 64 KiB of buf against the file's bytes from base_off"""
    for k in range(windows):
        ln = min(n, 64 << 10)
        off = (n - ln) // max(1, windows - 1) * k
        if not np.array_equal(cupy.asnumpy(buf[off:off + ln]), expected(seed, ln, base_off + off)):
            return False
    return True


def callers(a, cupy, kvikio, base, emit, default_nt):
    """The caller legs through KvikIO: each at the default thread count and
    at the best of SWEEP (both rows; config says which)."""
    want = set(a.callers.split(",")) if a.callers != "all" else {
        "seq16m", "files1t", "rand4k", "write16m", "write8t", "gpu1", "dev1", "gpu2"}
    path, seed, size = big_file(a)
    if not os.path.exists(path):
        print(f"kvikio callers: n/a (no {path})", file=sys.stderr)
        return
    kvikio.defaults.set({"num_threads": default_nt, "task_size": default_ts})
    name = os.path.basename(os.path.dirname(os.path.dirname(path)))
    hot = [(path, None, size)]
    dest = cupy.empty(size, dtype=cupy.uint8)

    def timed(fn):
        drop_caches(hot, False)
        c0, t0 = cpu(), time.perf_counter()
        ok = fn()
        cupy.cuda.runtime.deviceSynchronize()
        return ok, time.perf_counter() - t0, cpu() - c0

    def both(mode, fn, nbytes, call_size, threads=1, files=1, ds=name, extra=None):
        """run fn at the default and at each SWEEP count; emit default and best"""
        results = []
        counts = [default_nt] + [n for n in SWEEP if n != default_nt]
        for nt in counts:
            kvikio.defaults.set({"num_threads": nt})
            ok, secs, cpus = timed(fn)
            results.append((nbytes / secs if ok else 0, nt, ok, secs, cpus))
        kvikio.defaults.set({"num_threads": default_nt})
        best = max(results, key=lambda x: x[0])
        for tag, r in (("default", results[0]), ("best", best)):
            _, nt, ok, secs, cpus = r
            emit(row(base, dataset=ds, mode=mode, cache="hot" if not mode.startswith("write") else "-",
                     bytes=nbytes if ok else 0, seconds=f"{secs:.6f}", cpu_s=f"{cpus:.3f}", files=files,
                     files_s=f"{files / secs:.1f}", threads=threads, call_size=call_size, io_threads=nt,
                     chunk_size=kvikio.defaults.get("task_size"),
                     config=f"kvikio {tag}: {nt} threads ({'default' if tag == 'default' else 'best of ' + '/'.join(map(str, counts))})"
                     + (f", {extra}" if extra else ""), verified=1 if ok else 0, error=0 if ok else -84))

    if "seq16m" in want:
        def seq():
            with kvikio.CuFile(path, "r") as f:
                for off in range(0, size, CALL):
                    n = min(CALL, size - off)
                    if f.read(dest[off:off + n], n, off) != n:
                        return False
            return check(cupy, dest, seed, size)
        both("seq16m", seq, size, CALL, extra="CuFile.read 16 MiB calls")
    if "files1t" in want:
        root = os.path.join(a.data, "imagenetish")
        files = files_of(root)
        if files:
            files = [files[i] for i in leg_order(len(files))]
            tot = sum(s for _, _, s in files)
            buf = cupy.empty(max(s for _, _, s in files), dtype=cupy.uint8)

            def loop():
                for p, _, s in files:
                    with kvikio.CuFile(p, "r") as f:
                        if f.read(buf[:s]) != s:
                            return False
                p, rel, s = files[-1]
                return check(cupy, buf[:s], seed_of(rel), s, windows=2)
            drop_caches(files, False)
            both("files1t", loop, tot, 0, files=len(files), ds="imagenetish", extra="CuFile open/read/close per file")
    if "rand4k" in want:
        span = min(size, 4 << 30)
        st, offs = 0x4a11, []
        for _ in range(a.rand_reads):
            st = (st * 6364136223846793005 + 1442695040888963407) & 0xFFFFFFFFFFFFFFFF
            offs.append(((st >> 20) % (span // 4096)) * 4096)
        buf = cupy.empty(4096, dtype=cupy.uint8)
        drop_caches(hot, False)
        lat = []
        c0, t0 = cpu(), time.perf_counter()
        with kvikio.CuFile(path, "r") as f:
            for off in offs:
                s0 = time.perf_counter()
                f.read(buf, 4096, off)
                lat.append((time.perf_counter() - s0) * 1e6)
        secs, cpus = time.perf_counter() - t0, cpu() - c0
        ok = np.array_equal(cupy.asnumpy(buf), expected(seed, 4096, offs[-1]))
        lat.sort()
        emit(row(base, dataset=name, mode="rand4k", cache="hot", bytes=4096 * len(offs) if ok else 0,
                 seconds=f"{secs:.6f}", cpu_s=f"{cpus:.3f}", files=1, files_s=0, call_size=4096,
                 p50_us=f"{lat[len(lat) // 2]:.2f}", p99_us=f"{lat[min(len(lat) - 1, int(len(lat) * 0.99))]:.2f}",
                 io_threads=default_nt, config=f"kvikio CuFile.read 4 KiB, {len(offs)} reads, default threads",
                 verified=1 if ok else 0, error=0 if ok else -84))
    wsize = a.write_size or size
    if "write16m" in want or "write8t" in want:
        # the source holds the big file, so what is written can be checked
        with kvikio.CuFile(path, "r") as f:
            f.read(dest[:wsize], wsize, 0)
        wpath = os.path.join(a.data, "callers-write-kvikio.bin")
        for mode, nthr in (("write16m", 1), ("write8t", 8)):
            if mode not in want:
                continue

            def wr(nthr=nthr):
                if os.path.exists(wpath):
                    os.unlink(wpath)
                span = ((wsize + nthr - 1) // nthr + 4095) // 4096 * 4096
                with kvikio.CuFile(wpath, "w") as f:
                    def part(i):
                        lo, hi = i * span, min(wsize, (i + 1) * span)
                        for off in range(lo, hi, CALL):
                            n = min(CALL, hi - off)
                            if f.write(dest[off:off + n], n, off) != n:
                                return False
                        return True
                    with cf.ThreadPoolExecutor(nthr) as ex:
                        ok = all(ex.map(part, range(nthr)))
                fd = os.open(wpath, os.O_RDWR)
                os.fdatasync(fd)
                os.close(fd)
                with open(wpath, "rb") as g:
                    g.seek(wsize // 2)
                    ok = ok and np.array_equal(np.frombuffer(g.read(4096), np.uint8),
                                               expected(seed, 4096, wsize // 2))
                return ok
            both(mode, wr, wsize, CALL, threads=nthr, extra="CuFile.write 16 MiB calls + fdatasync")
            if os.path.exists(wpath):
                os.unlink(wpath)
    if "gpu1" in want:
        def one():
            with kvikio.CuFile(path, "r") as f:
                return f.read(dest) == size and check(cupy, dest, seed, size, windows=4)
        both("gpu1", one, size, size, extra="CuFile.read of the whole file")
    if "dev1" in want and cupy.cuda.runtime.getDeviceCount() >= 2:
        # issue 19: GPU 1 alone, against gpu1 (GPU 0)
        with cupy.cuda.Device(1):
            dest1 = cupy.empty(size, dtype=cupy.uint8)

        def one1():
            with cupy.cuda.Device(1):
                with kvikio.CuFile(path, "r") as f:
                    n = f.read(dest1)
                cupy.cuda.runtime.deviceSynchronize()
                return n == size and check(cupy, dest1, seed, size, windows=4)
        both("dev1", one1, size, size, extra="CuFile.read of the whole file into GPU 1")
        del dest1
    if "gpu2" in want:
        if cupy.cuda.runtime.getDeviceCount() < 2:
            print(f"{name:12s} gpu2     kvikio          -              n/a needs two GPUs")
        else:
            with cupy.cuda.Device(1):
                dest1 = cupy.empty(size, dtype=cupy.uint8)
            bufs = [dest, dest1]

            def two():
                def on(i):
                    with cupy.cuda.Device(i):
                        with kvikio.CuFile(path, "r") as f:
                            n = f.read(bufs[i])
                        cupy.cuda.runtime.deviceSynchronize()
                        return n == size
                with cf.ThreadPoolExecutor(2) as ex:
                    ok = all(ex.map(on, range(2)))
                with cupy.cuda.Device(1):
                    ok = ok and check(cupy, dest1, seed, size, windows=4)
                return ok
            both("gpu2", two, 2 * size, size, threads=2, files=2, extra="two threads, one CuFile.read per GPU")
            del dest1
    del dest


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--datasets", default=",".join(DATASETS))
    ap.add_argument("--cache", default="cold")
    ap.add_argument("--modes", default="sync,async,stream")
    ap.add_argument("--threads", type=int, default=8)
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--callers", default="none")
    ap.add_argument("--legs", default="", help="DATASET:MODE:CACHE items, * for any (opends-bench --legs)")
    ap.add_argument("--big-size", type=int, default=8 << 30)
    ap.add_argument("--write-size", type=int, default=0)
    ap.add_argument("--rand-reads", type=int, default=20000)
    ap.add_argument("--commit", default="")
    ap.add_argument("--compat", default="ON", choices=["ON", "OFF", "AUTO"])
    a = ap.parse_args()
    os.environ["KVIKIO_COMPAT_MODE"] = a.compat  # read when kvikio is imported
    try:
        try:  # installed with pip --target: the library is loaded by hand
            import libkvikio
            libkvikio.load_library()
        except ImportError:
            pass
        import cupy
        import kvikio
        import kvikio.defaults
    except Exception as e:  # noqa: BLE001 - any import failure means n/a
        print(f"kvikio baseline: n/a ({e})", file=sys.stderr)
        return 0
    os.makedirs(a.out, exist_ok=True)
    path = os.path.join(a.out, "records.csv")
    fresh = not os.path.exists(path)
    out = open(path, "a", newline="")
    w = csv.DictWriter(out, COLUMNS, extrasaction="ignore")
    if fresh:
        w.writeheader()
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    print(f"kvikio {kvikio.__version__}, compat mode {kvikio.defaults.get('compat_mode')}", file=sys.stderr)
    global default_ts
    default_nt, default_ts = kvikio.defaults.get("num_threads"), kvikio.defaults.get("task_size")
    base = dict(date=date, commit=a.commit, backend="kvikio", mem="device", repeats=1, call_size=0, queue_depth="",
                p50_us=0, p99_us=0, verified=0, error=0, concurrency=0, threads=1)

    def emit(r):
        w.writerow(r)
        out.flush()
        fig = (f"p50 {float(r['p50_us']):6.1f} us p99 {float(r['p99_us']):6.1f}" if r["mode"] == "rand4k"
               else f"{r['mib_s']:>10s} MiB/s")
        print(f"{r['dataset']:12s} {r['mode']:8s} {'kvikio':15s} {r['cache']:4s} {fig}  {r['config']}"
              f"{'  FAILED' if r['error'] else ''}", flush=True)

    modes = [m for m in a.modes.split(",") if m in ("sync", "async", "stream")]
    for ds in [d for d in a.datasets.split(",") if d in DATASETS]:
        if a.legs and not any(leg_wanted(a, ds, m, c) for m in ("sync", "async", "stream") for c in ("cold", "hot")):
            continue
        root = os.path.join(a.data, ds)
        files = files_of(root)
        if not files:
            print(f"kvikio: no files in {root}", file=sys.stderr)
            continue
        files = [files[i] for i in leg_order(len(files))]  # the order of every other reader
        total = sum(s for _, _, s in files)
        maxsz = max(s for _, _, s in files)
        conc = min(CONCURRENCY[ds], len(files))
        nslots = min(max(conc, a.threads), len(files))
        dest = cupy.empty(nslots * maxsz, dtype=cupy.uint8)
        slots = [dest[i * maxsz:(i + 1) * maxsz] for i in range(nslots)]

        def run(mode, cold, cfgname):
            drop_caches(files, cold)
            last = {}
            err = 0
            c0, t0 = cpu(), time.perf_counter()
            if mode == "sync":
                # one slot per pool thread: two files never share a slot
                local = threading.local()
                counter = iter(range(nslots))
                lock = threading.Lock()

                def one(i):
                    if not hasattr(local, "slot"):
                        with lock:
                            local.slot = next(counter)
                    p, _, s = files[i]
                    with kvikio.CuFile(p, "r") as f:
                        n = f.read(slots[local.slot][:s])
                    return i, local.slot, n
                with cf.ThreadPoolExecutor(min(a.threads, nslots)) as ex:
                    for i, slot, n in ex.map(one, range(len(files))):
                        if n != files[i][2]:
                            err = -5
                        last[slot] = i
            elif mode == "async":
                ring = [None] * conc
                for i, (p, _, s) in enumerate(files):
                    k = i % conc
                    if ring[k]:
                        f, fut, j = ring[k]
                        if fut.get() != files[j][2]:
                            err = -5
                        f.close()
                    f = kvikio.CuFile(p, "r")
                    ring[k] = (f, f.pread(slots[k][:s]), i)
                    last[k] = i
                for r in ring:
                    if r:
                        f, fut, j = r
                        if fut.get() != files[j][2]:
                            err = -5
                        f.close()
            else:  # stream
                streams = [cupy.cuda.Stream(non_blocking=True) for _ in range(conc)]
                ring = [None] * conc
                for i, (p, _, s) in enumerate(files):
                    k = i % conc
                    if ring[k]:
                        f, fut, j = ring[k]
                        if fut.check_bytes_done() != files[j][2]:
                            err = -5
                        f.close()
                    f = kvikio.CuFile(p, "r")
                    ring[k] = (f, f.raw_read_async(slots[k][:s], streams[k].ptr), i)
                    last[k] = i
                for r in ring:
                    if r:
                        f, fut, j = r
                        if fut.check_bytes_done() != files[j][2]:
                            err = -5
                        f.close()
            cupy.cuda.runtime.deviceSynchronize()
            secs = time.perf_counter() - t0
            cpus = cpu() - c0
            verified = 0
            for k, i in list(last.items())[:8]:
                p, rel, s = files[i]
                n = min(s, 16 << 20)
                got = cupy.asnumpy(slots[k][:n])
                if not np.array_equal(got, expected(seed_of(rel), n)):
                    print(f"kvikio verify: {p} differs", file=sys.stderr)
                    err = -84
                    break
                verified += 1
            return row(base, dataset=ds, mode=mode, cache="cold" if cold else "hot",
                       bytes=total if not err else 0, seconds=f"{secs:.6f}", cpu_s=f"{cpus:.3f}",
                       files=len(files), files_s=f"{len(files) / secs:.1f}",
                       threads=min(a.threads, nslots) if mode == "sync" else 1,
                       concurrency=0 if mode == "sync" else conc,
                       io_threads=kvikio.defaults.get("num_threads"),
                       chunk_size=kvikio.defaults.get("task_size"), config=cfgname, verified=verified, error=err)

        if not modes and not a.legs:
            continue
        # tune KvikIO's pool on this dataset (hot, sync), then keep the best
        best = None
        for nt in (8, 32):
            for ts in (4 << 20, 16 << 20):
                kvikio.defaults.set({"num_threads": nt, "task_size": ts})
                r = run("sync", False, f"tuning {nt}x{ts >> 20}MiB")
                if not r["error"] and (best is None or float(r["mib_s"]) > best[0]):
                    best = (float(r["mib_s"]), nt, ts)
        if best:
            kvikio.defaults.set({"num_threads": best[1], "task_size": best[2]})
        cfgname = (f"kvikio {kvikio.defaults.get('num_threads')} threads x {kvikio.defaults.get('task_size') >> 20} MiB"
                   f" compat {a.compat}")
        caches = [c for c in ("cold", "hot") if c in a.cache.split(",") or f"{ds}:{c}" in a.cache.split(",")]
        if a.legs:
            caches = ["cold", "hot"]
        for cache in caches:
            for mode in (m for m in (("sync", "async", "stream") if a.legs else modes) if leg_wanted(a, ds, m, cache)):
                try:
                    r = run(mode, cache == "cold", cfgname)
                except Exception as e:  # noqa: BLE001 - a mode KvikIO cannot do here is n/a
                    print(f"kvikio {ds} {mode} {cache}: n/a ({e})", file=sys.stderr)
                    continue
                emit(r)
        del dest, slots
    if a.callers != "none":
        callers(a, cupy, kvikio, base, emit, default_nt)
    out.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
