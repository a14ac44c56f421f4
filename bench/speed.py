"""The four speed measures in one run, printed as one table.

    python -m bench.speed --out /tmp/koa-bench/speed            # about 20 minutes on a 2-core machine
    python -m bench.speed --from-dir /tmp/koa-bench/speed       # print the table of a saved run again

One after the other (only one Spark at a time), each a script of its own writing its figures as JSON into
``--out``:

1. ``bench.small_audit --pairs P``: the shared scenario's log dirs, reports on and ``--skip-reports``, each ÷ the
   bare Spark process (fresh processes, alternated, medians) -> ``small.json``;
2. ``bench.small_audit --lab --pairs P``: the same against a 3-broker lab cluster (``--no-lab``: not measured) ->
   ``small-live.json``;
3. ``bench.run_benchmark --n 10000 --n 20000000 --repeat 2``: the marginal rate and the naive decoder ->
   ``m20.json``;
4. ``bench.run_benchmark --n 20000000 --n 100000000 --skip-naive``: 100M with default driver memory, the driver's
   memory from 20M to 100M -> ``m100.json``;
5. ``bench.run_benchmark --n 20000000 --skip-naive`` on ``local[2]``, then on ``local-cluster[2,1,1024]``, twice
   (alternated, a fresh process each) -> ``lc-local-1.json``, ``lc-cluster-1.json``, ``lc-local-2.json``,
   ``lc-cluster-2.json``: the median ``local-cluster`` run() ÷ the median ``local[2]`` run().

``--quick`` runs every step with small inputs (1 pair; 10k, 200k and 400k commits) to check the script itself: its
figures are not the measures' own inputs, and the table says so.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

#: the speed targets
SMALL_TARGETS = {"reports": 1.5, "skip_reports": 1.2}
MARGINAL_TARGET, NAIVE_TARGET = 2_000_000, 6.0
FLAT_MAX_GROWTH, LOCAL_CLUSTER_TARGET = 1.5, 1.25
LOCAL_CLUSTER = "local-cluster[2,1,1024]"


def steps(pairs: int, lab: bool, quick: bool) -> list[tuple[str, list[str]]]:
    """(JSON file name, ``python -m`` arguments) of each step, in order."""
    small, large, scale = (10_000, 200_000, 400_000) if quick else (10_000, 20_000_000, 100_000_000)
    pairs = 1 if quick else pairs
    out = [("small.json", ["bench.small_audit", "--pairs", str(pairs)])]
    if lab:
        out.append(("small-live.json", ["bench.small_audit", "--lab", "--pairs", str(pairs)]))
    out += [
        (
            "m20.json",
            ["bench.run_benchmark", "--n", str(small), "--n", str(large), "--repeat", "2", "--master", "local[2]"],
        ),
        (
            "m100.json",
            ["bench.run_benchmark", "--n", str(large), "--n", str(scale), "--skip-naive", "--master", "local[2]"],
        ),
    ]
    for i in (1, 2):
        for name, master in (("local", "local[2]"), ("cluster", LOCAL_CLUSTER)):
            out.append(
                (f"lc-{name}-{i}.json", ["bench.run_benchmark", "--n", str(large), "--skip-naive", "--master", master])
            )
    return out


def _verdict(ok: bool | None) -> str:
    return "n/a" if ok is None else ("PASS" if ok else "FAIL")


def _small_rows(res: dict | None, number: str, what: str) -> list[list[str]]:
    if res is None:
        return [[number, f"{what}: not measured (--no-lab)", "-", "-", "n/a"]]
    rows = []
    for variant, label in (("reports", "reports on"), ("skip_reports", "--skip-reports")):
        r = res[variant]
        target = SMALL_TARGETS[variant]
        pairs = f"{res['pairs']} pair{'s' if res['pairs'] != 1 else ''}"
        rows.append(
            [
                number,
                f"{what}, {label} ÷ bare Spark process ({pairs}, medians)",
                f"{r['median_s']:.2f} s ÷ {res['bare_median_s']:.2f} s = {r['ratio']:.2f}x",
                f"<= {target}x",
                _verdict(r["ratio"] <= target),
            ]
        )
    return rows


def _row(res: dict, n: int) -> dict:
    return next(r for r in res["rows"] if r["n"] == n)


def table(results: dict) -> tuple[list[list[str]], bool]:
    """The rows (measure, what, value, target, verdict) of the saved results, and whether every measured
    target passed."""
    rows = _small_rows(results["small.json"], "1", "shared scenario's log dirs")
    m20, m100 = results["m20.json"], results["m100.json"]
    lo, hi = sorted(m20["rows"], key=lambda r: r["n"])[0], sorted(m20["rows"], key=lambda r: r["n"])[-1]
    dt = hi["run_seconds"] - lo["run_seconds"]
    # a larger run that is not slower measures noise, not a rate: that is a failed measurement, never a pass
    marginal = (hi["n"] - lo["n"]) / dt if dt > 0 else None
    rows.append(
        [
            "2",
            f"marginal rate, N={lo['n']:,} -> {hi['n']:,} (faster of 2 runs each, reports on)",
            f"({hi['n']:,} - {lo['n']:,}) ÷ ({hi['run_seconds']:.1f} - {lo['run_seconds']:.1f} s) = "
            + (f"{marginal:,.0f}/s" if marginal is not None else "not measured: the larger run was not slower"),
            f">= {MARGINAL_TARGET:,}/s",
            _verdict(marginal is not None and marginal >= MARGINAL_TARGET),
        ]
    )
    naive = hi.get("naive_records_per_second")
    rows.append(
        [
            "2",
            f"marginal rate ÷ the naive kafka-python decoder over the same {hi['n']:,} commits",
            f"{marginal / naive:.2f}x (naive {naive:,}/s)" if naive and marginal is not None else "-",
            f">= {NAIVE_TARGET:g}x",
            _verdict((marginal is not None and marginal / naive >= NAIVE_TARGET) if naive else None),
        ]
    )
    small3, big3 = sorted(m100["rows"], key=lambda r: r["n"])[0], sorted(m100["rows"], key=lambda r: r["n"])[-1]
    rows.append(
        [
            "3",
            f"N={big3['n']:,}, default driver memory: run() completes, findings as generated",
            f"{big3['run_seconds']:.1f} s, findings "
            f"{'as expected' if big3['findings_as_expected'] else 'NOT as expected'}",
            "completes",
            _verdict(big3["findings_as_expected"]),
        ]
    )
    for key, label in (
        ("driver_python_peak_rss_mib", "driver Python peak RSS"),
        ("jvm_heap_live_at_stage_ends_mib", "driver JVM heap live after a full GC, stage ends"),
    ):
        if key not in small3 or key not in big3:
            rows.append(["3", f"{label}, N={small3['n']:,} -> {big3['n']:,}", "not recorded", "-", "n/a"])
            continue
        growth = big3[key] / small3[key] if small3[key] else float("inf")
        rows.append(
            [
                "3",
                f"{label}, N={small3['n']:,} -> {big3['n']:,}",
                f"{small3[key]:.0f} -> {big3[key]:.0f} MiB = {growth:.2f}x",
                f"<= {FLAT_MAX_GROWTH}x",
                _verdict(growth <= FLAT_MAX_GROWTH),
            ]
        )
    local = [_row(results[f"lc-local-{i}.json"], hi["n"])["run_seconds"] for i in (1, 2)]
    cluster = [_row(results[f"lc-cluster-{i}.json"], hi["n"])["run_seconds"] for i in (1, 2)]
    ratio = statistics.median(cluster) / statistics.median(local)
    rows.append(
        [
            "3",
            f"{LOCAL_CLUSTER} ÷ local[2], N={hi['n']:,}, run(), alternated, 2 pairs, medians",
            f"{statistics.median(cluster):.1f} s ÷ {statistics.median(local):.1f} s = {ratio:.2f}x "
            f"(runs {', '.join(f'{x:.1f}' for pair in zip(local, cluster) for x in pair)})",
            f"<= {LOCAL_CLUSTER_TARGET}x",
            _verdict(ratio <= LOCAL_CLUSTER_TARGET),
        ]
    )
    rows += _small_rows(results.get("small-live.json"), "4", "live, --bootstrap-servers of a 3-broker lab cluster")
    return rows, all(r[4] != "FAIL" for r in rows)


def render(results: dict) -> str:
    rows, ok = table(results)
    hdr = ["#", "measure", "figure", "target", "verdict"]
    w = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(hdr)]
    lines = [" | ".join(h.ljust(w[i]) for i, h in enumerate(hdr)), "-+-".join("-" * x for x in w)]
    lines += [" | ".join(c.ljust(w[i]) for i, c in enumerate(r)) for r in rows]
    head = (
        f"speed measures, one run ({results['meta']['started']} -> {results['meta']['finished']}, "
        f"{results['meta']['cpus']} CPUs)"
    )
    if results["meta"].get("quick"):
        head += ": --quick, small inputs only; NOT the measures' inputs"
    return "\n".join([head, *lines, "", "every measured target met" if ok else "some target NOT met"])


def _load(out: Path) -> dict:
    results = {
        name: json.loads((out / name).read_text()) if (out / name).exists() else None
        for name in (
            "small.json",
            "small-live.json",
            "m20.json",
            "m100.json",
            "lc-local-1.json",
            "lc-cluster-1.json",
            "lc-local-2.json",
            "lc-cluster-2.json",
        )
    }
    results["meta"] = json.loads((out / "meta.json").read_text())
    return results


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="the four speed measures in one run, one table")
    ap.add_argument("--out", default="/tmp/koa-bench/speed", help="directory for each step's JSON and the table")
    ap.add_argument("--pairs", type=int, default=2, help="alternated pairs of the small-audit ratios (default 2)")
    ap.add_argument("--no-lab", action="store_true", help="leave measure 4 out (it needs mvn and Kafka's jars)")
    ap.add_argument("--quick", action="store_true", help="small inputs, to check this script (not the measures)")
    ap.add_argument("--from-dir", metavar="DIR", help="print the table of a saved run and exit")
    a = ap.parse_args(argv)
    if a.pairs < 1:
        ap.error("--pairs must be at least 1")
    if a.from_dir:
        print(render(_load(Path(a.from_dir))))
        return 0
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    for stale in out.glob("*.json"):
        stale.unlink()
    (out / "table.txt").unlink(missing_ok=True)
    meta = {
        "started": time.strftime("%Y-%m-%d %H:%M:%S"),
        "cpus": os.cpu_count(),
        "quick": a.quick,
        "pairs": a.pairs,
        "steps": [],
    }
    for name, args in steps(a.pairs, not a.no_lab, a.quick):
        cmd = [sys.executable, "-m", *args, "--output", str(out / name)]
        print(f"[speed] {' '.join(cmd[2:])}", flush=True)
        t = time.time()
        subprocess.run(cmd, check=True)
        meta["steps"].append({"command": " ".join(["python", *cmd[1:]]), "seconds": round(time.time() - t, 1)})
    meta["finished"] = time.strftime("%Y-%m-%d %H:%M:%S")
    (out / "meta.json").write_text(json.dumps(meta, indent=1))
    text = render(_load(out))
    (out / "table.txt").write_text(text + "\n")
    print("\n" + text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
