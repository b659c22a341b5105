#!/usr/bin/env python3
"""Benchmark loading a safetensors file onto a GPU.

Loaders timed (each to cuda:N, ending with torch.cuda.synchronize()):
  safetensors   safetensors.torch.load_file(path, device=...)
  opends        opends.safetensors.load_file(path, device=...)
  fastsafetensors  SafeTensorsFileLoader (nogds=True unless --fst-gds), when
                importable
each "hot" (file in the page cache: one untimed warm-up read) and "cold"
(page cache dropped with `echo 3 > /proc/sys/vm/drop_caches`; needs root,
else the cold rows are skipped). Every loader's result is compared byte for
byte with safetensors'. Prints a table and writes CSV to --out.

    python3 python/bench_safetensors.py --size-gib 4 --out bench.csv
    python3 python/bench_safetensors.py --file model.safetensors --runs 3

Needs torch with CUDA and safetensors; fastsafetensors is optional.
"""
import argparse
import csv
import gc
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)


def generate(path, size_gib, seed=0):
    """Write a safetensors file of about size_gib GiB of bf16/f16 tensors
    with LLM-like shapes (plus small norms and biases)."""
    import torch
    from safetensors.torch import save_file

    g = torch.Generator().manual_seed(seed)
    target = int(size_gib * (1 << 30))
    tensors, total, layer = {}, 0, 0
    shapes = [(4096, 4096), (4096, 4096), (4096, 4096), (4096, 4096), (11008, 4096), (4096, 11008), (11008, 4096)]
    while total < target:
        for j, shape in enumerate(shapes):
            dt = torch.bfloat16 if (layer + j) % 3 else torch.float16
            t = torch.empty(shape, dtype=dt)
            t.view(torch.int16).random_(-32768, 32767, generator=g)  # fast random bits
            t.view(torch.int16)[t.view(torch.int16).bitwise_and(0x7C00) == 0x7C00] = 0  # no inf/nan
            tensors["model.layers.%d.w%d" % (layer, j)] = t
            total += t.numel() * 2
            if total >= target:
                break
        tensors["model.layers.%d.norm" % layer] = torch.ones(4096, dtype=torch.bfloat16)
        layer += 1
    save_file(tensors, path, metadata={"format": "pt"})
    return len(tensors)


def drop_caches():
    """Drop the page cache; False when not permitted."""
    try:
        os.sync()
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
        return True
    except OSError:
        return False


def warm(path):
    with open(path, "rb") as f:
        while f.read(64 << 20):
            pass


def load_safetensors(path, device):
    from safetensors.torch import load_file

    return load_file(path, device=device), None


def load_opends(path, device):
    from opends.safetensors import load_file

    return load_file(path, device=device), None


def load_fst(path, device, gds=False):
    import torch
    from fastsafetensors import SafeTensorsFileLoader, SingleGroup

    loader = SafeTensorsFileLoader(SingleGroup(), torch.device(device), nogds=not gds)
    loader.add_filenames({0: [path]})
    fb = loader.copy_files_to_device()
    out = {k: fb.get_tensor(k) for k in list(fb.key_to_rank_lidx.keys())}

    def close():
        fb.close()
        loader.close()

    return out, close


def same(ref, out):
    import torch

    if set(ref) != set(out):
        return False
    for k, a in ref.items():
        b = out[k]
        if a.dtype != b.dtype or a.shape != b.shape:
            return False
        if not torch.equal(a.contiguous().reshape(-1).view(torch.uint8), b.contiguous().reshape(-1).view(torch.uint8)):
            return False
    return True


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--file", help="an existing .safetensors file (else one is generated)")
    ap.add_argument("--dir", default=os.environ.get("TMPDIR", "/tmp"), help="where to generate the file")
    ap.add_argument("--size-gib", type=float, default=4.0, help="size of the generated file")
    ap.add_argument("--device", default="cuda:0")
    ap.add_argument("--runs", type=int, default=2, help="timed runs per loader and cache state")
    ap.add_argument("--loaders", default="safetensors,opends,fastsafetensors")
    ap.add_argument("--modes", default="hot,cold")
    ap.add_argument("--fst-gds", action="store_true", help="fastsafetensors with GDS (nogds=False)")
    ap.add_argument("--keep", action="store_true", help="keep the generated file")
    ap.add_argument("--out", default="bench_safetensors.csv", help="CSV output path")
    args = ap.parse_args()

    import torch

    if not torch.cuda.is_available():
        sys.exit("bench_safetensors: CUDA is not available")
    torch.cuda.init()
    torch.empty(1, device=args.device)

    path, generated = args.file, False
    if not path:
        path = os.path.join(args.dir, "opends_bench_%.1fgib.safetensors" % args.size_gib)
        if not os.path.exists(path):
            t0 = time.perf_counter()
            n = generate(path, args.size_gib)
            print("generated %s: %d tensors, %.2f GiB in %.1f s" % (path, n, os.path.getsize(path) / 2**30, time.perf_counter() - t0))
            generated = not args.keep
    size = os.path.getsize(path)

    import opends

    loaders = {"safetensors": load_safetensors, "opends": load_opends}
    try:
        import fastsafetensors  # noqa: F401

        loaders["fastsafetensors"] = lambda p, d: load_fst(p, d, args.fst_gds)
    except ImportError:
        print("fastsafetensors not importable: skipped")
    wanted = [name for name in args.loaders.split(",") if name in loaders]
    modes = args.modes.split(",")
    if "cold" in modes and not drop_caches():
        print("cannot drop the page cache (not root?): cold runs skipped")
        modes = [m for m in modes if m != "cold"]

    ref, _ = load_safetensors(path, args.device)
    torch.cuda.synchronize()
    print("opends backend: %s" % opends.backend())

    rows = []
    for mode in modes:
        for name in wanted:
            times, ok = [], True
            for _ in range(args.runs):
                gc.collect()
                torch.cuda.empty_cache()
                if mode == "cold":
                    drop_caches()
                else:
                    warm(path)
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                out, close = loaders[name](path, args.device)
                torch.cuda.synchronize()
                dt = time.perf_counter() - t0
                times.append(dt)
                ok = ok and same(ref, out)
                del out
                if close:
                    close()
            best = min(times)
            rows.append(
                {
                    "loader": name,
                    "cache": mode,
                    "bytes": size,
                    "runs": len(times),
                    "best_s": round(best, 4),
                    "median_s": round(statistics.median(times), 4),
                    "best_GBps": round(size / best / 1e9, 3),
                    "equal": ok,
                    "backend": opends.backend() if name == "opends" else "",
                }
            )
            r = rows[-1]
            print("%-16s %-5s %8.3f s  %7.2f GB/s  equal=%s" % (name, mode, r["best_s"], r["best_GBps"], ok), flush=True)

    print()
    print("| loader | cache | best s | median s | GB/s | equal |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print("| %s | %s | %.3f | %.3f | %.2f | %s |" % (r["loader"], r["cache"], r["best_s"], r["median_s"], r["best_GBps"], r["equal"]))
    with open(args.out, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]) if rows else ["loader"])
        w.writeheader()
        w.writerows(rows)
    print("wrote %s" % args.out)
    if generated:
        os.unlink(path)
    if not all(r["equal"] for r in rows):
        sys.exit(1)


if __name__ == "__main__":
    main()
