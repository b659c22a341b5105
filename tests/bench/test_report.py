"""bench/report: the tables' arithmetic on small records.csv files with known
answers (the best ceiling shape, the median of a leg's rows rather than the
best, ratios, flags, dropped n/a columns, failed legs, caller legs, P6)."""
import csv
import importlib.machinery
import importlib.util
import os

HERE = os.path.dirname(os.path.abspath(__file__))
loader = importlib.machinery.SourceFileLoader("report", os.path.join(HERE, "..", "..", "bench", "report"))
spec = importlib.util.spec_from_loader("report", loader)
report = importlib.util.module_from_spec(spec)
loader.exec_module(report)

COLS = ["date", "dataset", "mode", "backend", "cache", "bytes", "seconds", "mib_s", "error", "cpu_s", "mem",
        "p50_us", "p99_us", "config", "files_s"]


def write(tmp_path, rows):
    with open(tmp_path / "records.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(COLS)
        for r in rows:
            r = list(r) + [""] * (len(COLS) - 1 - len(r))
            w.writerow(["d"] + r)
    return report.load(str(tmp_path / "records.csv"))


def row_of(md, *key):
    for line in md.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if cells[:len(key)] == list(key):
            return cells
    return None


def test_ceiling_best_shape_leg_median_and_flags(tmp_path):
    rows = write(tmp_path, [
        ("lmcacheish", "sync", "ceiling-disk", "cold", 1, 1, "1000", 0),
        ("lmcacheish", "batch", "ceiling-disk", "cold", 1, 1, "1250", 0),  # best shape is the ceiling
        ("lmcacheish", "sync", "cufile", "cold", 1, 1, "500", 0),
        ("lmcacheish", "sync", "kvikio", "cold", 1, 1, "2000", 0),
        ("lmcacheish", "sync", "opends:uring", "cold", 1, 1, "1500", 0),
        ("lmcacheish", "sync", "opends:uring", "cold", 1, 1, "9999", -5),  # failed: not a figure
        ("lmcacheish", "batch", "opends:uring", "cold", 1, 1, "700", 0),   # three rows (--append):
        ("lmcacheish", "batch", "opends:uring", "cold", 1, 1, "750", 0),   # the median, never the best
        ("lmcacheish", "batch", "opends:uring", "cold", 1, 1, "5000", 0),
        ("-", "copy", "ceiling-h2d", "-", 1, 1, "3000", 0),
        ("lmcacheish", "sync", "opends:uring", "hot", 1, 1, "2400", 0),
    ])
    md = "\n\n".join(report.dataset_tables(rows))
    cold = md.split("hot cache")[0]
    # dataset mode disk cufile kvikio uring / disk / cufile / kvikio
    assert row_of(cold, "lmcacheish", "sync") == ["lmcacheish", "sync", "1250", "500", "2000", "1500",
                                                  "1.20 ⚠", "3.00", "0.75"]
    assert row_of(cold, "lmcacheish", "batch") == ["lmcacheish", "batch", "1250", "n/a", "n/a", "750",
                                                   "0.60", "n/a", "n/a"]
    assert row_of(cold, "lmcacheish", "async") is None
    hot = md.split("hot cache")[1]
    assert row_of(hot, "lmcacheish", "sync")[-1] == "0.80"  # 2400 / 3000 pinned copy ceiling
    # columns that are n/a in every row are left out
    assert "cufile" not in hot.splitlines()[2]
    full = report.tables(rows)
    assert "lmcacheish/sync/opends:uring/cold (-5)" in full
    assert "under-measured" in full


def test_small_file_sync_legs_read_against_their_own_concurrency(tmp_path):
    # BENCH.md: ceiling-disk at the leg's concurrency. imagenetish's sync leg
    # (8 threads, one whole file each) against the pread shapes (tagged
    # sync); its deep-queue legs, and a large file's sync call, against
    # every shape.
    rows = write(tmp_path, [
        ("imagenetish", "sync", "ceiling-disk", "cold", 1, 1, "1400", 0),
        ("imagenetish", "batch", "ceiling-disk", "cold", 1, 1, "1600", 0),
        ("imagenetish", "sync", "opends:uring", "cold", 1, 1, "1330", 0),
        ("imagenetish", "async", "opends:uring", "cold", 1, 1, "1440", 0),
        ("filesize8gib", "sync", "ceiling-disk", "cold", 1, 1, "1500", 0),
        ("filesize8gib", "batch", "ceiling-disk", "cold", 1, 1, "2000", 0),
        ("filesize8gib", "sync", "opends:uring", "cold", 1, 1, "1900", 0),
    ])
    cold = "\n\n".join(report.dataset_tables(rows)).split("hot cache")[0]
    assert row_of(cold, "imagenetish", "sync")[2:4] == ["1400", "1330"]
    assert row_of(cold, "imagenetish", "sync")[-1] == "0.95"
    assert row_of(cold, "imagenetish", "async")[2] == "1600"
    assert row_of(cold, "filesize8gib", "sync")[2] == "2000"
    summary = report.summary_table(rows)
    assert row_of(summary, "imagenetish sync cold")[2:] == ["ceiling-disk 1400", "0.95"]
    assert row_of(summary, "imagenetish async cold")[2:] == ["ceiling-disk 1600", "0.90"]


def test_summary_takes_the_default_not_a_tagged_variant(tmp_path):
    rows = write(tmp_path, [
        ("imagenetish", "batch", "ceiling-disk", "cold", 1, 1, "1600", 0),
        ("imagenetish", "async", "opends:uring", "cold", 1, 1, "1440", 0),
        ("imagenetish", "async", "opends:uring+t16", "cold", 1, 1, "1900", 0),  # an A/B row
    ])
    assert row_of(report.summary_table(rows), "imagenetish async cold")[1:] == [
        "1440 MiB/s (uring)", "ceiling-disk 1600", "0.90"]
    assert "1440 (uring)" in report.readme_table(rows, "bench/results/x")


def test_readme_table_picks_best_backend_of_the_folder(tmp_path):
    rows = write(tmp_path, [
        ("tiktokish", "stream", "ceiling-disk", "cold", 1, 1, "1000", 0),
        ("tiktokish", "stream", "cufile", "cold", 1, 1, "800", 0),
        ("tiktokish", "stream", "opends:ref", "cold", 1, 1, "900", 0),
        ("tiktokish", "stream", "opends:uring", "cold", 1, 1, "1200", 0),
    ])
    t = report.readme_table(rows, "bench/results/x")
    assert row_of(t, "tiktokish", "stream") == ["tiktokish", "stream", "1000", "800", "n/a", "1200 (uring)",
                                                "1.20", "1.50", "n/a"]


def test_caller_table(tmp_path):
    rows = write(tmp_path, [
        ("-", "copy", "ceiling-h2d", "-", 1, 1, "50000", 0),
        ("big", "seq16m", "posix", "hot", 1, 1, "10000", 0, 1, "device"),
        ("big", "seq16m", "kvikio", "hot", 1, 1, "8000", 0, 1, "device", 0, 0, "kvikio default: 1 threads"),
        ("big", "seq16m", "kvikio", "hot", 1, 1, "12000", 0, 1, "device", 0, 0, "kvikio best: 16 threads"),
        ("big", "seq16m", "opends:uring", "hot", 1, 1, "40000", 0, 1, "device"),
        ("img", "files1t", "posix", "hot", 1, 1, "2000", 0, 1, "device", 0, 0, "", "20000"),
        ("img", "files1t", "opends:uring", "hot", 1, 1, "1000", 0, 1, "device", 0, 0, "", "10000"),
        ("big", "rand4k", "opends:uring", "hot", 1, 1, "100", 0, 1, "device", "21.5", "40.0"),
        ("big", "rand4k", "opends:uring", "hot", 1, 1, "300", 0, 1, "host", "9.5", "20.0"),
        ("big", "write", "ceiling-write", "-", 1, 1, "2000", 0),
        ("big", "write16m", "cufile", "-", 1, 1, "1600", 0, 1, "device"),
        ("big", "write16m", "opends:uring", "-", 1, 1, "1500", 0, 1, "device"),
    ])
    t = report.caller_table(rows)
    seq = row_of(t, "seq16m")
    assert seq[3] == "40000" and seq[4] == "10000"
    assert seq[5] == "12000 (best), 8000 (default)"
    assert seq[7] == "ceiling-h2d 50000"
    assert seq[8] == "0.80; 4.00× posix; 3.33× kvikio"
    files = row_of(t, "files1t")
    assert files[3] == "1000 (10000 files/s)" and files[8].endswith("0.50× posix")
    rand = row_of(t, "rand4k")
    assert rand[3] == "p50 21.5 / p99 40.0 µs; host memory p50 9.5 / p99 20.0"
    w = row_of(t, "write16m")
    assert w[7] == "ceiling-write 2000" and w[8] == "0.75; 0.94× cufile"


def test_p6_cpu_per_gib(tmp_path):
    gib = 2**30
    rows = write(tmp_path, [
        ("imagenetish", "sync", "opends:uring", "cold", 2 * gib, 1, "2048", 0, "1.0"),
        ("imagenetish", "sync", "cufile", "cold", gib, 1, "1024", 0, "0.25"),
    ])
    t = report.summary_table(rows)
    assert row_of(t, "P6: CPU-s per GiB, sync cold") == ["P6: CPU-s per GiB, sync cold", "0.50", "cufile 0.25", "2.00"]


def test_chart_says_why_it_is_missing(tmp_path):
    rows = write(tmp_path, [("imagenetish", "sync", "opends:uring", "hot", 1, 1, "100", 0)])
    why = report.chart(rows, str(tmp_path / "report.png"))
    try:
        import matplotlib  # noqa: F401
        assert why is None and (tmp_path / "report.png").exists()
    except ImportError:
        assert "matplotlib" in why and not (tmp_path / "report.png").exists()


def test_split_sweep_and_ceiling_h2d_of_the_same_command(tmp_path):
    # a sweep split over two calls: records.csv and records-part2.csv read as one folder
    write(tmp_path, [("-", "copy", "ceiling-h2d", "-", 1, 1, "50000", 0),
                     ("big", "seq16m", "opends:uring", "hot", 1, 1, "40000", 0, 1, "device")])
    os.rename(tmp_path / "records.csv", tmp_path / "records-part2.csv")
    with open(tmp_path / "records.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(COLS)
        w.writerow(["t1", "-", "copy", "ceiling-h2d", "-", 1, 1, "40000", 0])
        w.writerow(["t1", "filesize8gib", "sync", "opends:uring", "hot", 1, 1, "36000", 0])
    (tmp_path / "records-other.csv").write_text("not,ours\n")  # not a records file: ignored
    rows = report.load_dir(str(tmp_path))
    assert len(rows) == 4
    # each leg is read against the copy ceiling its own command measured
    seq = row_of(report.caller_table(rows), "seq16m")
    assert seq[4] == "ceiling-h2d 50000" and seq[5] == "0.80"  # (the peers' columns are n/a, dropped)
    hot = row_of(report.summary_table(rows), "filesize8gib sync hot")
    assert hot[2] == "ceiling-h2d 40000" and hot[3] == "0.90"


def test_many_tensors_rows_and_summary(tmp_path):
    log = tmp_path / "many.log"
    log.write_text("20000 tensors x 16384 bytes = 327.7 MB; framework torch, device cuda:0\n"
                   "  opends           one  median 0.0100 s  32.77 GB/s  (best 0.0090 s, 36.41 GB/s)\n"
                   "  opends           many median 0.0400 s  8.19 GB/s  (best 0.0350 s, 9.36 GB/s)\n"
                   "  opends           many/one = 0.25 by medians, 0.26 by best runs\n"
                   "  safetensors      many median 0.3000 s  1.09 GB/s  (best 0.2900 s, 1.13 GB/s)\n")
    assert report.add_many_tensors(str(log), str(tmp_path)) == 0
    rows = report.load_dir(str(tmp_path))
    assert [(r["mode"], r["backend"]) for r in rows] == [("one", "opends"), ("many", "opends"),
                                                        ("many", "safetensors")]
    assert rows[1]["mib_s"] == round(20000 * 16384 / 2**20 / 0.04, 1)
    line = next(l for l in report.summary_table(rows).splitlines() if "issue 22" in l)
    cells = [c.strip() for c in line.strip("|").split("|")]
    assert cells[3] == "0.25" and "safetensors 1042" in cells[2] and "fastsafetensors n/a" in cells[2]
    assert report.add_many_tensors(str(tmp_path / "records.csv"), str(tmp_path)) == 1  # no figures: refused


def test_dev1_against_gpu1(tmp_path):
    rows = write(tmp_path, [
        ("big", "gpu1", "opends:uring", "hot", 1, 1, "40000", 0, 1, "device"),
        ("big", "dev1", "opends:uring", "hot", 1, 1, "38000", 0, 1, "device"),
    ])
    d = row_of(report.caller_table(rows), "dev1")
    assert d[4] == "gpu1 40000" and d[5] == "0.95"  # (the peers' columns are n/a, dropped)
    s = next(l for l in report.summary_table(rows).splitlines() if "issue 19: dev1" in l)
    assert s.rstrip(" |").endswith("0.95")


def test_dropin_rows_and_summary(tmp_path):
    log = tmp_path / "dropin.log"
    log.write_text(
        "lib=nvidia-cufile mode=hot mem=device size_mib=8192 chunk_mib=16 threads=1 seconds=0.810 GB/s=10.61 "
        "h2d_ceiling_GB/s=53.84 ratio=0.20\n"
        "lib=opends-dropin mode=hot mem=device size_mib=8192 chunk_mib=16 threads=1 seconds=0.405 GB/s=21.21 "
        "h2d_ceiling_GB/s=55.41 ratio=0.38 passes=3 GB/s_min..max=20.00..22.00\n"
        "some other line\n"
        "lib=opends-dropin mode=cold mem=device size_mib=8192 chunk_mib=16 threads=8 seconds=5.104 GB/s=1.68 FAILED\n")
    assert report.add_dropin(str(log), str(tmp_path)) == 0
    rows = report.load_dir(str(tmp_path))
    assert [(r["backend"], r["mode"], r["cache"], r["error"]) for r in rows] == [
        ("cufile", "read1t", "hot", 0), ("opends:dropin", "read1t", "hot", 0), ("opends:dropin", "read8t", "cold", -5)]
    assert rows[1]["mib_s"] == round(8192 / 0.405, 1)
    assert rows[1]["repeats"] == 3 and rows[1]["mib_s_max"] == round(22e9 / 2**20, 1)  # median of 3 passes
    assert report.opends_backends(rows) == []  # the drop-in is no backend column of the leg tables
    line = next(l for l in report.summary_table(rows).splitlines() if "drop-in, hot" in l)
    assert line.rstrip(" |").endswith("2.00") and "NVIDIA libcufile 10114" in line and ", 1 thread(s)" in line


def test_gpu2_one_bound_in_both_tables(tmp_path):
    rows = write(tmp_path, [
        ("big", "gpu1", "opends:uring", "hot", 1, 1, "40000", 0, 1, "device"),
        ("big", "read", "ceiling-host", "hot", 1, 1, "110000", 0),
        ("big", "copy", "ceiling-h2d2", "hot", 1, 1, "50000", 0),
        ("big", "gpu2", "opends:uring", "hot", 1, 1, "45000", 0, 1, "device"),
    ])
    g = row_of(report.caller_table(rows), "gpu2")
    assert g[4] == "min(2× gpu1, host, h2d2) 50000" and g[5] == "0.90"
    s = next(l for l in report.summary_table(rows).splitlines() if "issue 19: gpu2" in l)
    assert "min(2× gpu1, host, h2d2) 50000" in s and s.rstrip(" |").endswith("0.90")
