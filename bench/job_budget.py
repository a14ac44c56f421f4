"""Spark jobs per stage of one audit of the bundled scenario (what ``tests/pipeline/test_job_budget.py`` bounds).

``python -m bench.job_budget [--skip-reports] [--mode latest|history]`` audits the bundled scenario on
``local[2]`` and prints, for each stage of :func:`audit.pipeline.run` (read, decode, partition state, judge,
write, reports), its wall time, the Spark jobs it started (counted from Spark's status tracker) and, for each, the
action and the line of ``audit/`` that started it (for a job of a thread, the line that started the thread).  The
jobs after the commit (none by default) count under ``after commit``.  The first audit of a process: its times
include the JVM's and the Python workers' warm-up.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time


def _jobs(spark) -> set[int]:
    return set(spark.sparkContext.statusTracker().getJobIdsForGroup(None))


#: the DataFrame methods and writer methods that start Spark jobs in an audit
_ACTIONS = {
    "DataFrame": ("collect", "count", "first", "take", "toArrow", "toPandas", "localCheckpoint", "checkpoint"),
    "DataFrameWriter": ("parquet", "save", "json", "csv", "text"),
}


def _audit_frame():
    """The innermost frame of ``audit/`` on this thread's stack (None outside the audit)."""
    import traceback

    for frame in reversed(traceback.extract_stack()):
        if "/audit/" in frame.filename:
            return frame
    return None


def _audit_line() -> str:
    """The innermost frame of ``audit/`` on this thread's stack, as ``path:line (function)``."""
    frame = _audit_frame()
    return "?" if frame is None else f"{frame.filename.split('/audit/', 1)[1]}:{frame.lineno} ({frame.name})"


def _name_call_sites(spark) -> None:
    """Make each job's call site (its first stage's name) the action and the ``audit/`` line that started it.

    Spark names a job from the local property ``callSite.short`` when it is set; pyspark's own call sites point at
    py4j (``NativeMethodAccessorImpl.java:0``) for most DataFrame actions.
    """
    import pyspark.traceback_utils as tb
    from pyspark.sql import DataFrame, DataFrameWriter
    from pyspark.sql.classic.dataframe import DataFrame as ClassicDataFrame

    first_spark_call = tb.first_spark_call

    def audit_call_site():
        site, frame = first_spark_call(), _audit_frame()
        if site is None or frame is None:
            return site
        return tb.CallSite(function=site.function, file=frame.filename.split("/audit/", 1)[1], linenum=frame.lineno)

    tb.first_spark_call = audit_call_site  # pyspark's own call sites (collect, toArrow ...) name the audit's line
    sc = spark.sparkContext
    for cls in (DataFrame, ClassicDataFrame, DataFrameWriter):
        for name in _ACTIONS["DataFrameWriter" if cls is DataFrameWriter else "DataFrame"]:
            original = cls.__dict__.get(name)
            if original is None:
                continue

            def wrapped(self, *a, _original=original, _name=name, **kw):
                before = sc.getLocalProperty("callSite.short")
                sc.setLocalProperty("callSite.short", f"{_name} at {_audit_line()}")
                try:
                    return _original(self, *a, **kw)
                finally:
                    sc.setLocalProperty("callSite.short", before)

            setattr(cls, name, wrapped)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--skip-reports", action="store_true")
    ap.add_argument("--mode", choices=("latest", "history"), default="latest")
    args = ap.parse_args(argv)

    from audit import pipeline
    from audit.cli import demo_log_dirs
    from audit.spark import build_session

    spark = build_session("local[2]")
    spark.sparkContext.setLogLevel("ERROR")
    _name_call_sites(spark)
    seen = _jobs(spark)
    per_stage: list[tuple[str, list[int]]] = []
    times: list[float] = []
    original = pipeline.stages._Stage.__call__

    def mark(stage, name: str) -> None:
        nonlocal seen
        now = _jobs(spark)
        if per_stage:
            per_stage[-1][1].extend(sorted(now - seen))
        seen = now
        per_stage.append((name, []))
        times.append(time.monotonic())
        original(stage, name)

    pipeline.stages._Stage.__call__ = mark  # type: ignore[method-assign]
    with tempfile.TemporaryDirectory() as tmp:
        cfg = pipeline.AuditConfig(
            log_dirs=[demo_log_dirs()],
            output=f"{tmp}/out",
            quiet=True,
            reports=not args.skip_reports,
            mode=args.mode,
        )
        pipeline.run(cfg, spark)
    per_stage[-1][1].extend(sorted(_jobs(spark) - seen))
    times.append(time.monotonic())
    per_stage.append(("after commit", []))
    times.append(times[-1])
    tracker = spark.sparkContext.statusTracker()
    total = 0
    for i, (name, jobs) in enumerate(per_stage):
        total += len(jobs)
        print(f"{name:16} {len(jobs):3} jobs  {times[i + 1] - times[i]:6.2f} s")
        for j in jobs:
            info = tracker.getJobInfo(j)
            stages = [tracker.getStageInfo(s) for s in (info.stageIds if info else [])]
            site = min((s for s in stages if s), key=lambda s: s.stageId).name if any(stages) else "?"
            print(f"{'':18}job {j}: {site}")
    print(f"total            {total:3} jobs")
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
