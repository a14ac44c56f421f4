"""Audit the same inputs with two revisions of the code and compare every output: the check that a
refactoring changed no result.

    python -m bench.compare_revisions [--base REV] [--work DIR] [INPUT ...]

``--base`` (default ``HEAD``) is checked out into a temporary git worktree; the working tree is the other side.
Each revision audits every input in one Spark session of its own (``local[2]``, reports on, latest and history
mode), and :mod:`bench.compare_outputs` then compares each pair of outputs: every Parquet table (schema, and rows as
sorted multisets) and ``summary.json`` without the figures that differ between any two runs.  The default inputs
are the bundled scenario, the recorded lab scenarios under ``tests/data/lab-scenarios`` and the real log dirs under
``../shared/data/real`` (history mode only: their groups are few).  Exit status 0 when every pair is equal.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: run in a child process whose ``sys.path`` starts with one revision's tree: audits ``jobs`` (a JSON list of
#: [name, log_dirs, mode]) into ``out/<name>``
_RUNNER = """
import json, sys
sys.path.insert(0, sys.argv[1])
from audit.pipeline import AuditConfig, run
from audit.spark import build_session
spark = build_session("local[2]")
spark.sparkContext.setLogLevel("ERROR")
for name, dirs, mode in json.loads(sys.argv[3]):
    cfg = AuditConfig(log_dirs=dirs, output=f"{sys.argv[2]}/{name}", quiet=True, reports=True, mode=mode)
    print(name, run(cfg, spark).exit_code, flush=True)
spark.stop()
"""


def default_inputs() -> list[Path]:
    """The bundled scenario's log dirs, each recorded lab scenario's, and each real log dir set."""
    found = [ROOT / "audit/demo_data/unclean-election-3brokers/brokers"]
    found += sorted(p / "brokers" for p in (ROOT / "tests/data/lab-scenarios").iterdir() if (p / "brokers").is_dir())
    real = ROOT.parent / "shared/data/real"
    if real.is_dir():
        found += sorted(p for p in real.iterdir() if p.is_dir())
    return found


def _jobs(inputs: list[Path]) -> list[list]:
    jobs = []
    for path in inputs:
        name = path.parent.name if path.name == "brokers" else path.name
        real = "shared/data/real" in str(path)
        for mode in ("history",) if real else ("latest", "history"):
            jobs.append([f"{name}-{mode}", [str(path)], mode])
    return jobs


def _audit(tree: Path, out: Path, jobs: list[list]) -> None:
    env = {**os.environ, "PYTHONPATH": str(tree), "PYSPARK_PYTHON": sys.executable}
    subprocess.run([sys.executable, "-c", _RUNNER, str(tree), str(out), json.dumps(jobs)], check=True, env=env)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", default="HEAD", help="the revision to compare the working tree with (default HEAD)")
    ap.add_argument("--work", help="where to write both revisions' outputs (default: a temporary directory)")
    ap.add_argument("inputs", nargs="*", type=Path, help="log dir sets to audit (default: see above)")
    args = ap.parse_args(argv)
    jobs = _jobs(args.inputs or default_inputs())
    work = Path(args.work or tempfile.mkdtemp(prefix="koa-compare-"))
    base_tree = work / "base-tree"
    if base_tree.exists():
        subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(base_tree)], check=False)
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "-q", "--detach", str(base_tree), args.base], check=True)
    try:
        for side, tree in (("base", base_tree), ("new", ROOT)):
            shutil.rmtree(work / side, ignore_errors=True)
            _audit(tree, work / side, jobs)
    finally:
        subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(base_tree)], check=False)
    failed = 0
    for name, _dirs, _mode in jobs:
        rc = subprocess.run(
            [sys.executable, "-m", "bench.compare_outputs", str(work / "base" / name), str(work / "new" / name)],
            cwd=ROOT,
        ).returncode
        print(f"{name}: {'same' if rc == 0 else 'DIFFERENT'}", flush=True)
        failed += rc != 0
    print(f"{len(jobs) - failed} of {len(jobs)} outputs the same ({work})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
