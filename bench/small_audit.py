"""Small-audit ratio (issue 11, measure 1): a whole ``kafka-offset-audit audit`` of a small input, in a
fresh process, against the least a Spark job costs here.

    python -m bench.small_audit --pairs 2 --output /tmp/koa-bench/small.json

* **A** (audit): ``kafka-offset-audit audit --log-dirs <scenario>/brokers/* --output <tmp>``, reports on
  (and, as a second variant, ``--skip-reports``), run through :func:`audit.cli.main` in a fresh process
  that then ends as the console script does (:func:`audit.cli.exit_now`, see :func:`audit.cli.entry`):
  the same code the console script runs.  The child also records the Spark jobs ``run()`` started and
  the seconds between the pipeline's progress lines (``read``, ``decode``, ``judge``, ``expectations``,
  ``write``, then ``console``).
* **B** (bare Spark): a fresh process that starts ``local[2]`` Spark, runs one ``mapInArrow`` job, writes
  one Parquet file and stops (:func:`bare_child`).

The CLI starts its driver JVM from a class-data archive (:class:`audit.spark.ClassDataArchive`) that the first
run on a machine writes.  The bench keeps its own archive directory: it times that first run on its own, waits
for its JVM to write the archive, then alternates A (reports), B, A (``--skip-reports``), B, A (reports,
``KOA_CDS=off``), B.

Runs alternate A B A B ...; each figure is a wall time from ``Popen`` to exit.  The ratio is the median of
the A times over the median of the B times.  Targets (issue 11): <= 1.5x with reports, <= 1.2x without.
Measure 4 (a live cluster): ``--lab [VERSION]`` starts a 3-broker lab cluster (``tests/lab``, Kafka from Maven
Central; needs ``mvn``), gives it 4 topics of 4 partitions (replication factor 3, 10 records each) and 20 groups'
commits with leader epochs, and audits it with ``--bootstrap-servers`` (``--bootstrap-servers HOST:PORT`` audits
a cluster you started).  The bare Spark process is the same.

``--warm N`` adds the floor: N audits (reports on) one after another in one process and one session with the
JVM's default options (a long-lived driver, its JIT warmed by the earlier audits), timed from ``run()`` to its
return, the median of the last three against the bare process.  It is the audit's own work with no JVM start,
no class loading and no JIT warm-up left: what a fresh process could not go below however cheap its start.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SCENARIO = REPO.parent / "shared" / "data" / "scenarios" / "unclean-election-3brokers" / "brokers"
TARGETS = {"reports": 1.5, "skip_reports": 1.2}


def bare_child(out_dir: str) -> None:
    """B: start local[2] Spark, one mapInArrow job, one Parquet file, stop."""
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local[2]")
        .appName("bare")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    spark.range(1000, numPartitions=2).mapInArrow(lambda batches: batches, "id long").coalesce(1).write.mode(
        "overwrite"
    ).parquet(out_dir)
    spark.stop()


def audit_child(argv: list[str], stats_file: str) -> int:
    """A: ``audit.cli.main(argv)``, recording the Spark jobs and progress-line times of its ``run()`` (the caller
    then ends the process with ``audit.cli.exit_now``, as the console script does)."""
    import audit.pipeline as pipeline
    from audit import cli

    marks: list[tuple[str, float, int]] = []
    info: dict = {}

    def jobs() -> int:
        from pyspark.sql import SparkSession

        s = SparkSession.getActiveSession()
        return len(s.sparkContext.statusTracker().getJobIdsForGroup(None)) if s else 0

    real_progress, real_run = pipeline.config.progress, pipeline.run

    def progress(cfg, msg):
        marks.append((msg.split(":", 1)[0], time.perf_counter(), jobs()))
        real_progress(cfg, msg)

    def run(cfg, spark, **kw):
        info["jobs_before"], info["t_run"] = jobs(), time.perf_counter()
        res = real_run(cfg, spark, **kw)
        info["jobs_after"], info["t_end"] = jobs(), time.perf_counter()
        return res

    # progress lines: every module of the pipeline calls them through audit.pipeline.config
    pipeline.config.progress, pipeline.run = progress, run
    cli.run = run  # the CLI imported run() by name
    code = cli.main(argv)
    stages, prev_t, prev_j = {}, info.get("t_run", 0.0), info.get("jobs_before", 0)
    for name, t, j in marks + [("console", info.get("t_end", 0.0), info.get("jobs_after", 0))]:
        stages[name] = {"seconds": round(t - prev_t, 3), "jobs": j - prev_j}
        prev_t, prev_j = t, j
    Path(stats_file).write_text(
        json.dumps(
            {
                "exit_code": code,
                "run_seconds": round(info.get("t_end", 0.0) - info.get("t_run", 0.0), 3),
                "jobs": info.get("jobs_after", 0) - info.get("jobs_before", 0),
                "stages": stages,
            }
        )
    )
    return code


def warm_child(n: int, stats_file: str, log_dirs: list[str], work: str) -> None:
    """The floor (``--warm``): ``n`` audits of ``log_dirs`` (reports on) in one session with the JVM's default
    options; writes each run's ``run()`` seconds and seconds per progress line to ``stats_file``."""
    import audit.pipeline as pipeline
    from audit.pipeline import AuditConfig
    from audit.spark import build_session

    marks: list[tuple[str, float]] = []
    real_progress = pipeline.config.progress

    def progress(cfg, msg):
        marks.append((msg.split(":", 1)[0], time.perf_counter()))
        real_progress(cfg, msg)

    pipeline.config.progress = progress
    spark = build_session("local[2]")
    runs = []
    for i in range(n):
        out = os.path.join(work, f"warm-{i}")
        marks.clear()
        t = time.perf_counter()
        pipeline.run(AuditConfig(log_dirs=log_dirs, output=out, quiet=True, reports=True), spark)
        end = time.perf_counter()
        stages, prev = {}, t
        for name, m in marks + [("console", end)]:
            stages[name] = round(stages.get(name, 0.0) + m - prev, 3)
            prev = m
        runs.append({"run_seconds": round(end - t, 3), "stages": stages})
        shutil.rmtree(out, ignore_errors=True)
        print(f"  warm audit {i + 1} of {n}: {end - t:6.2f} s", flush=True)
    spark.stop()
    Path(stats_file).write_text(json.dumps(runs))


def measure_warm(n: int, log_dirs: list[str], work: str, bare_s: float) -> dict:
    """Run :func:`warm_child` in a fresh process; the median of its last three audits over ``bare_s``."""
    stats = os.path.join(work, "warm.json")
    proc = subprocess.run(
        [sys.executable, "-m", "bench.small_audit", "--child-warm", str(n), stats, work, "--", *log_dirs],
        stderr=subprocess.PIPE,
        text=True,
    )
    if proc.returncode != 0:
        raise SystemExit(f"the warm session failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    runs = json.loads(Path(stats).read_text())
    last = runs[-3:]
    med = statistics.median(r["run_seconds"] for r in last)
    names = list(dict.fromkeys(k for r in last for k in r["stages"]))
    return {
        "audits": n,
        "runs_s": [r["run_seconds"] for r in runs],
        "median_last3_s": round(med, 3),
        "ratio": round(med / bare_s, 2),
        "stages_median_last3_s": {k: round(statistics.median(r["stages"].get(k, 0.0) for r in last), 3) for k in names},
    }


def _timed(cmd: list[str], env: dict | None = None) -> tuple[float, int]:
    t = time.perf_counter()
    proc = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
    wall = time.perf_counter() - t
    if proc.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(cmd[:6])} ... failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return wall, proc.returncode


def _wait_for_dump(cds_dir: str, timeout: float = 300) -> None:
    """Wait until the JVM of a run that writes the class-data archive has ended (its pid is in ``<dump>.json``)."""
    deadline = time.time() + timeout
    for meta in glob.glob(os.path.join(cds_dir, "*.dumping-*.jsa.json")):
        pid = json.loads(Path(meta).read_text())["pid"]
        while time.time() < deadline:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.5)


def measure(pairs: int, source_args: list[str], work: str) -> dict:
    """A first run with an empty class-data archive directory (it writes the archive), then ``pairs`` times:
    A (reports), B, A (--skip-reports), B, A (reports, ``KOA_CDS=off``), B; medians and ratios."""
    runs: dict[str, list] = {"reports": [], "skip_reports": [], "reports_no_cds": [], "bare": []}
    details: dict[str, list] = {"reports": [], "skip_reports": [], "reports_no_cds": [], "first_run": []}
    py = sys.executable
    cds_dir = os.path.join(work, "cds")  # the bench's own: its first run is a machine's first run
    env = dict(os.environ, KOA_CDS_DIR=cds_dir)

    def audit(variant: str, i: int) -> float:
        out = os.path.join(work, f"{variant}-{i}")
        shutil.rmtree(out, ignore_errors=True)
        stats = os.path.join(work, f"{variant}-{i}.json")
        argv = ["audit", *source_args, "--output", out, "--quiet"]
        if variant == "skip_reports":
            argv.append("--skip-reports")
        wall, _ = _timed(
            [py, "-m", "bench.small_audit", "--child-audit", stats, "--", *argv],
            dict(env, KOA_CDS="off") if variant == "reports_no_cds" else env,
        )
        details[variant].append({"wall_seconds": round(wall, 3), **json.loads(Path(stats).read_text())})
        return wall

    first = audit("first_run", 0)
    print(f"  first run (writes the class-data archive): {first:6.2f} s", flush=True)
    _wait_for_dump(cds_dir)
    for i in range(pairs):
        for variant in ("reports", "bare", "skip_reports", "bare", "reports_no_cds", "bare"):
            if variant == "bare":
                out = os.path.join(work, f"bare-{i}")
                shutil.rmtree(out, ignore_errors=True)
                wall, _ = _timed([py, "-m", "bench.small_audit", "--child-bare", out], env)
            else:
                wall = audit(variant, i)
            runs[variant].append(round(wall, 3))
            print(f"  {variant:14s} run {i + 1}: {wall:6.2f} s", flush=True)
    bare = statistics.median(runs["bare"])
    out = {
        "runs": runs,
        "bare_median_s": round(bare, 3),
        "details": details,
        "first_run": {"wall_s": round(first, 3), "ratio": round(first / bare, 2)},
        "class_data_archive_mib": round(
            sum(os.path.getsize(f) for f in glob.glob(os.path.join(cds_dir, "*.jsa"))) / 2**20, 1
        ),
    }
    for v in ("reports", "skip_reports", "reports_no_cds"):
        med = statistics.median(runs[v])
        target = TARGETS.get(v)
        out[v] = {
            "median_s": round(med, 3),
            "ratio": round(med / bare, 2),
            "target": target,
            "pass": None if target is None else med / bare <= target,
        }
    return out


def print_table(res: dict) -> None:
    print(
        f"\nsmall-audit ratio ({res['source']}), {res['pairs']} pairs, medians; bare Spark process "
        f"{res['bare_median_s']:.2f} s"
    )
    print(f"{'variant':28s} {'wall s':>7s} {'ratio':>6s} {'target':>7s} {'jobs':>5s}  verdict")
    labels = {"reports": "reports", "skip_reports": "--skip-reports", "reports_no_cds": "reports, KOA_CDS=off"}
    for v in ("reports", "skip_reports", "reports_no_cds"):
        r = res[v]
        jobs = statistics.median([d["jobs"] for d in res["details"][v]]) if res["details"][v] else 0
        target = f"{r['target']:6.1f}x" if r["target"] else "      -"
        verdict = "-" if r["pass"] is None else ("PASS" if r["pass"] else "FAIL")
        print(f"{labels[v]:28s} {r['median_s']:7.2f} {r['ratio']:5.2f}x {target} {jobs:5.0f}  {verdict}")
    f = res["first_run"]
    print(
        f"{'reports, first run here':28s} {f['wall_s']:7.2f} {f['ratio']:5.2f}x       -       "
        f"(writes the {res['class_data_archive_mib']:.0f} MiB class-data archive; once per JDK and pyspark)"
    )
    w = res.get("warm")
    if w:
        print(
            f"{'reports, warm session (floor)':28s} {w['median_last3_s']:7.2f} {w['ratio']:5.2f}x       -       "
            f"(audits {w['audits'] - 2}-{w['audits']} of {w['audits']} in one session, run() only; by stage: "
            + ", ".join(f"{k} {v:.2f} s" for k, v in w["stages_median_last3_s"].items())
            + ")"
        )
    for v in ("reports", "skip_reports"):
        d = res["details"][v][-1] if res["details"][v] else None
        if d:
            print(
                f"  {v} (last run), run() {d['run_seconds']:.2f} s of {d['wall_seconds']:.2f} s wall; by stage: "
                + ", ".join(f"{k} {s['seconds']:.2f} s/{s['jobs']} jobs" for k, s in d["stages"].items())
            )


def _with_lab(a) -> int:
    """Start a lab cluster with some groups' commits, run :func:`main` against it, stop it."""
    sys.path.insert(0, str(REPO))
    from tests.lab import kafka_dist
    from tests.lab.client import LabClient
    from tests.lab.cluster import KafkaCluster

    version = a.lab or kafka_dist.versions()[0]
    work = Path(tempfile.mkdtemp(prefix="koa-small-lab-"))
    cluster = KafkaCluster(version, work / "cluster", brokers=3, heap="512m").start()
    try:
        topics = [f"small-{i}" for i in range(4)]
        with LabClient(version, cluster.bootstrap, log=work / "labclient.log") as lab:
            lab.call("create_topics", names=topics, partitions=4, rf=3)
            for t in topics:
                for p in range(4):
                    lab.call("produce", topic=t, partition=p, count=10, acks="all")
            for g in range(20):
                lab.call(
                    "commit",
                    group=f"small-group-{g:02d}",
                    offsets=[{"topic": topics[g % 4], "partition": p, "offset": 5, "epoch": 0} for p in range(4)],
                )
        argv = ["--pairs", str(a.pairs), "--bootstrap-servers", cluster.bootstrap]
        if a.output:
            argv += ["--output", a.output]
        print(f"lab cluster: Kafka {version}, 3 brokers at {cluster.bootstrap}", flush=True)
        return main(argv)
    finally:
        cluster.stop()
        shutil.rmtree(work, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--child-bare"]:
        bare_child(argv[1])
        return 0
    if argv[:1] == ["--child-warm"]:
        warm_child(int(argv[1]), argv[2], argv[5:], argv[3])
        return 0
    if argv[:1] == ["--child-audit"]:
        from audit.cli import exit_now

        exit_now(audit_child(argv[3:], argv[1]))  # as the console script ends (audit.cli.entry)
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pairs", type=int, default=2, help="A/B pairs (median; at least 2)")
    ap.add_argument("--log-dirs", nargs="+", default=None, help=f"default: {SCENARIO}/*")
    ap.add_argument("--bootstrap-servers", default=None, help="measure 4: audit a live cluster instead")
    ap.add_argument(
        "--lab",
        nargs="?",
        const="",
        default=None,
        metavar="VERSION",
        help="measure 4 on a lab cluster started here (default: the newest lab version)",
    )
    ap.add_argument("--output", default=None, help="write the figures as JSON here")
    ap.add_argument(
        "--warm",
        type=int,
        default=0,
        metavar="N",
        help="also time N audits in one warm session (the floor; log dirs only, N >= 3; 12 is about 3 minutes)",
    )
    a = ap.parse_args(argv)
    if a.warm and (a.warm < 3 or a.bootstrap_servers or a.lab is not None):
        ap.error("--warm takes N >= 3 and audits log dirs (not --bootstrap-servers or --lab)")
    if a.lab is not None:
        return _with_lab(a)
    if a.bootstrap_servers:
        source, source_args = a.bootstrap_servers, ["--bootstrap-servers", a.bootstrap_servers]
    else:
        dirs = a.log_dirs or sorted(glob.glob(str(SCENARIO / "*")))
        if not dirs:
            raise SystemExit(f"no log dirs: {SCENARIO} is missing; pass --log-dirs")
        source, source_args = "log dirs: " + " ".join(dirs), ["--log-dirs", *dirs]
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    work = tempfile.mkdtemp(prefix="koa-small-")
    try:
        res = measure(max(1, a.pairs), source_args, work)
        if a.warm:
            res["warm"] = measure_warm(a.warm, source_args[1:], work, res["bare_median_s"])
    finally:
        shutil.rmtree(work, ignore_errors=True)
    res.update(
        source=source,
        pairs=a.pairs,
        load_average=os.getloadavg()[0],
        cpus=os.cpu_count(),
        at=time.strftime("%Y-%m-%d %H:%M:%S"),
    )
    print_table(res)
    if a.output:
        Path(a.output).parent.mkdir(parents=True, exist_ok=True)
        Path(a.output).write_text(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
