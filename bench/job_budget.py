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


def _jobs(spark) -> set[int]:
    return set(spark.sparkContext.statusTracker().getJobIdsForGroup(None))


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
    seen = _jobs(spark)
    per_stage: list[tuple[str, list[int]]] = []
    original = pipeline.stages._Stage.__call__

    def mark(stage, name: str) -> None:
        nonlocal seen
        now = _jobs(spark)
        if per_stage:
            per_stage[-1][1].extend(sorted(now - seen))
        seen = now
        per_stage.append((name, []))
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
    per_stage.append(("after commit", sorted(_jobs(spark) - seen)))
    tracker = spark.sparkContext.statusTracker()
    total = 0
    for name, jobs in per_stage:
        total += len(jobs)
        print(f"{name:16} {len(jobs):3} jobs")
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
