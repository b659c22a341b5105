"""bench/report: the tables' arithmetic on a small records.csv with known
answers (best of several configurations, ratios, n/a cells, failed legs)."""
import csv
import importlib.machinery
import importlib.util
import os

HERE = os.path.dirname(os.path.abspath(__file__))
loader = importlib.machinery.SourceFileLoader("report", os.path.join(HERE, "..", "..", "bench", "report"))
spec = importlib.util.spec_from_loader("report", loader)
report = importlib.util.module_from_spec(spec)
loader.exec_module(report)

COLS = ["date", "dataset", "mode", "backend", "cache", "bytes", "seconds", "mib_s", "error"]


def write(tmp_path, rows):
    with open(tmp_path / "records.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(COLS)
        for r in rows:
            w.writerow(["d"] + list(r))
    return report.load(str(tmp_path / "records.csv"))


def row_of(md, dataset, mode):
    for line in md.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if cells[:2] == [dataset, mode]:
            return cells
    return None


def test_best_ratios_and_na(tmp_path):
    rows = write(tmp_path, [
        ("lmcacheish", "sync", "ceiling-disk", "cold", 1, 1, "1000", 0),
        ("lmcacheish", "sync", "ceiling-disk", "cold", 1, 1, "1250", 0),   # best ceiling counts
        ("lmcacheish", "sync", "cufile", "cold", 1, 1, "500", 0),
        ("lmcacheish", "sync", "kvikio", "cold", 1, 1, "2000", 0),
        ("lmcacheish", "sync", "opends:uring", "cold", 1, 1, "1500", 0),
        ("lmcacheish", "sync", "opends:uring", "cold", 1, 1, "9999", -5),  # failed: ignored
        ("lmcacheish", "batch", "opends:uring", "cold", 1, 1, "750", 0),
        ("-", "copy", "ceiling-h2d", "-", 1, 1, "3000", 0),
        ("lmcacheish", "sync", "opends:uring", "hot", 1, 1, "2400", 0),
    ])
    md = report.tables(rows)
    cold = md.split("### hot")[0]
    # dataset mode disk cufile kvikio uring / disk / cufile / kvikio
    assert row_of(cold, "lmcacheish", "sync") == ["lmcacheish", "sync", "1250", "500", "2000", "1500",
                                                  "1.20", "3.00", "0.75"]
    assert row_of(cold, "lmcacheish", "batch") == ["lmcacheish", "batch", "1250", "n/a", "n/a", "750",
                                                   "0.60", "n/a", "n/a"]
    assert row_of(cold, "lmcacheish", "async") is None
    hot = md.split("### hot")[1]
    assert row_of(hot, "lmcacheish", "sync")[-1] == "0.80"  # 2400 / 3000 pinned copy ceiling
    assert "lmcacheish/sync/opends:uring/cold (-5)" in md


def test_readme_table_picks_best_backend(tmp_path):
    rows = write(tmp_path, [
        ("tiktokish", "stream", "ceiling-disk", "cold", 1, 1, "1000", 0),
        ("tiktokish", "stream", "cufile", "cold", 1, 1, "800", 0),
        ("tiktokish", "stream", "opends:ref", "cold", 1, 1, "900", 0),
        ("tiktokish", "stream", "opends:uring", "cold", 1, 1, "1200", 0),
    ])
    t = report.readme_table(rows, "bench/results/x")
    assert row_of(t, "tiktokish", "stream") == ["tiktokish", "stream", "1000", "800", "n/a", "1200 (uring)",
                                                "1.20", "1.50", "n/a"]
