#!/usr/bin/env python3
"""KvikIO peer baseline for opends-bench: the same datasets and legs through
RAPIDS KvikIO, appended to the same records.csv (backend "kvikio").

    python3 bench/kvikio_bench.py --data DIR --out DIR --datasets a,b --cache cold,hot

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
COLUMNS = ("date,dataset,mode,backend,cache,bytes,seconds,mib_s,cpu_s,files,files_s,p50_us,p99_us,threads,"
           "concurrency,io_threads,queue_depth,chunk_size,mem,config,verified,error").split(",")
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


def expected(seed, n):
    """The first n bytes of a file with this seed (the generator of
    tools/bench/dataset.c, vectorised)."""
    words = (n + 7) // 8
    with np.errstate(over="ignore"):
        w = np.arange(words, dtype=np.uint64)
        v = mix64(np.uint64(seed) + w * M3)
    return v.astype("<u8").view(np.uint8)[:n]


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
            with open(p, "rb") as f:
                while f.read(4 << 20):
                    pass


def cpu():
    t = os.times()
    return t.user + t.system


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--datasets", default=",".join(DATASETS))
    ap.add_argument("--cache", default="cold")
    ap.add_argument("--modes", default="sync,async,stream")
    ap.add_argument("--threads", type=int, default=8)
    ap.add_argument("--compat", default="ON", choices=["ON", "OFF", "AUTO"])
    a = ap.parse_args()
    os.environ["KVIKIO_COMPAT_MODE"] = a.compat  # read when kvikio is imported
    try:
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
    w = csv.DictWriter(out, COLUMNS)
    if fresh:
        w.writeheader()
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    print(f"kvikio {kvikio.__version__}, compat mode {kvikio.defaults.get('compat_mode')}", file=sys.stderr)

    for ds in a.datasets.split(","):
        root = os.path.join(a.data, ds)
        files = files_of(root)
        if not files:
            print(f"kvikio: no files in {root}", file=sys.stderr)
            continue
        rng = random.Random(0x5eed)
        rng.shuffle(files)
        total = sum(s for _, _, s in files)
        maxsz = max(s for _, _, s in files)
        conc = min(CONCURRENCY[ds], len(files))
        nslots = max(conc, a.threads)
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
                counter = iter(range(a.threads))
                lock = threading.Lock()

                def one(i):
                    if not hasattr(local, "slot"):
                        with lock:
                            local.slot = next(counter)
                    p, _, s = files[i]
                    with kvikio.CuFile(p, "r") as f:
                        n = f.read(slots[local.slot][:s])
                    return i, local.slot, n
                with cf.ThreadPoolExecutor(a.threads) as ex:
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
            return dict(date=date, dataset=ds, mode=mode, backend="kvikio", cache="cold" if cold else "hot",
                        bytes=total if not err else 0, seconds=f"{secs:.6f}",
                        mib_s=f"{(total / 2**20 / secs) if not err else 0:.1f}", cpu_s=f"{cpus:.3f}",
                        files=len(files), files_s=f"{len(files) / secs:.1f}", p50_us=0, p99_us=0,
                        threads=a.threads if mode == "sync" else 1, concurrency=0 if mode == "sync" else conc,
                        io_threads=kvikio.defaults.get("num_threads"), queue_depth="",
                        chunk_size=kvikio.defaults.get("task_size"), mem="device", config=cfgname,
                        verified=verified, error=err)

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
        for cache in a.cache.split(","):
            for mode in a.modes.split(","):
                try:
                    r = run(mode, cache == "cold", cfgname)
                except Exception as e:  # noqa: BLE001 - a mode KvikIO cannot do here is n/a
                    print(f"kvikio {ds} {mode} {cache}: n/a ({e})", file=sys.stderr)
                    continue
                w.writerow(r)
                out.flush()
                print(f"{ds:13s} {mode:6s} kvikio {cache:4s} {r['mib_s']:>10s} MiB/s"
                      f"{'  FAILED' if r['error'] else ''}")
        del dest, slots
    out.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
