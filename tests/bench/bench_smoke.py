#!/usr/bin/env python3
"""CI smoke of every opends-bench leg on a machine without a GPU: the
README's --quick demo shrunk to a few seconds (tiny files, one run per leg),
then checks that records.csv has an error-free row for every dataset mode
and caller leg, its ceilings and peers, and that bench/report turns it into
a report; then a leg whose call never returns (HANG_SHIM, LD_PRELOAD) is
recorded as hung and ends the command with status 3, keeping the rows
before it. Usage: bench_smoke.py OPENDS_BENCH WORKDIR [HANG_SHIM]"""
import csv
import os
import subprocess
import sys

bench, work = sys.argv[1], sys.argv[2]
shim = sys.argv[3] if len(sys.argv) > 3 else None
here = os.path.dirname(os.path.abspath(__file__))
out = os.path.join(work, "smoke-out")
cmd = [bench, "--quick", "--quiet", "--data", os.path.join(work, "smoke-data"), "--out", out,
       "--datasets", "imagenetish", "--scale", "0.005", "--big-size", "32M", "--write-size", "16M",
       "--rand-reads", "200", "--repeat", "1", "--stream-flags", "0,7"]
p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=240)
print(p.stdout)
assert p.returncode == 0, f"opends-bench exited {p.returncode}"
rows = list(csv.DictReader(open(os.path.join(out, "records.csv"))))
bad = [r for r in rows if r["error"] != "0"]
assert not bad, f"failed rows: {bad}"
have = {(r["mode"], r["backend"].split(":")[0]) for r in rows}
want = [(m, "opends") for m in ("sync", "async", "stream", "batch", "seq16m", "files1t", "rand4k",
                                 "write16m", "write8t", "gpu1")]
want += [("stream:7", "opends")]  # streams registered with flags 7
want += [(m, "posix") for m in ("seq16m", "files1t", "rand4k", "write16m", "write8t")]
want += [("copy", "ceiling-h2d"), ("read", "ceiling-host"), ("write", "ceiling-write"),
         ("sync", "ceiling-disk"), ("batch", "ceiling-disk")]
missing = [w for w in want if w not in have]
assert not missing, f"legs without a row: {missing}"
for r in rows:
    assert r["commit"], "every row names the commit"
    if r["mode"] == "rand4k":
        assert float(r["p50_us"]) > 0 and float(r["p99_us"]) >= float(r["p50_us"])
    if r["mode"] in ("sync", "async", "stream", "batch") and r["backend"].startswith("opends:"):
        assert int(r["verified"]) > 0, f"{r['mode']}: nothing verified"
# dev1, gpu2 and fanout2 need two GPUs: said as n/a, not dropped silently
assert "dev1" in p.stdout and "gpu2" in p.stdout and "fanout2" in p.stdout and "n/a" in p.stdout
# the disk ceiling: every shape before the legs, the best one again after
disk = [r["config"] for r in rows if r["backend"] == "ceiling-disk"]
assert any("before the legs" in c for c in disk) and any("after the legs" in c for c in disk), disk
r = subprocess.run([sys.executable, os.path.join(here, "..", "..", "bench", "report"), out],
                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120)
print(r.stdout)
assert r.returncode == 0, "bench/report failed"
md = open(os.path.join(out, "report.md")).read()
assert "seq16m" in md and "ceiling-write" in md
print("smoke ok")

# bad input is refused before anything runs, with a message naming it
for bad, word in ((["--modes", "sync,foo"], "foo"), (["--cache", "warm"], "warm"), (["--callers", "seq1"], "seq1"),
                  (["--threads", "0"], "--threads"), (["--scale", "x"], "--scale"), (["--legs", "imagenetish:sync"],
                                                                                      "--legs"),
                  (["--big-size", "3X"], "--big-size"), (["--stream-flags", "9"], "--stream-flags"), (["extra"], "extra"),
                  (["--tag", "A B"], "--tag"), (["--hung-grace", "0"], "--hung-grace")):
    b = subprocess.run([bench] + bad, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=30)
    assert b.returncode == 2 and word in b.stderr, (bad, b.returncode, b.stderr)
v = subprocess.run([bench, "--version"], stdout=subprocess.PIPE, text=True, timeout=30)
assert v.returncode == 0 and v.stdout.startswith("opends-bench ")
print("bad input refused")

# a stream leg stuck in a call that never returns: recorded as hung 1 s
# past its 4 s limit (1 s let a ceiling leg hit it on a loaded machine),
# the command ends with 3, the rows before it stay
if shim:
    hout = os.path.join(work, "hang-out")
    # (under ASan the shim comes before the runtime in the load order: allowed)
    asan = os.environ.get("ASAN_OPTIONS", "")
    env = dict(os.environ, LD_PRELOAD=shim, ASAN_OPTIONS=(asan + ":" if asan else "") + "verify_asan_link_order=0")
    h = subprocess.run([bench, "--quiet", "--data", os.path.join(work, "smoke-data"), "--out", hout, "--datasets",
                        "imagenetish", "--scale", "0.005", "--cache", "hot", "--modes", "sync,stream",
                        "--callers", "none", "--leg-timeout", "4", "--hung-grace", "1"],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=60, env=env)
    print(h.stdout)
    assert h.returncode == 3, f"a hung leg ends the command with 3, not {h.returncode}"
    assert "HUNG: 'imagenetish stream" in h.stdout
    rows = list(csv.DictReader(open(os.path.join(hout, "records.csv"))))
    hung = [r for r in rows if r["mode"] == "stream"]
    assert len(hung) == 1 and hung[0]["error"] == "-110" and hung[0]["config"].startswith("hung"), hung
    assert any(r["mode"] == "sync" and r["error"] == "0" for r in rows), "the legs before it are kept"
    assert any(r["backend"] == "ceiling-disk" and r["error"] == "0" for r in rows), "and the ceilings measured"
    print("hung leg recorded")
