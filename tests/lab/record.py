"""Record a small lab scenario as committed test data: every node's log dir and the oracle's verdicts.

    python -m tests.lab.record --version 4.4.0 --seed 101 --episodes unclean,upgrade,txn,delete_records \
        --dest tests/data/lab-scenarios

writes ``<dest>/kafka-<version>-seed<seed>/``: ``brokers/<node>/`` (each node's log dir after a clean
shutdown), ``scenario.json`` (seed, episodes, schedule, the verdicts of Kafka's consumer taken with the
cluster up) and ``README.md`` (provenance). ``tests/lab/test_lab_recorded.py`` audits them offline.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

from . import scenario


def trim_preallocated_indexes(root: Path) -> list[str]:
    """Cut the zero padding off preallocated ``.index`` (8-byte entries) and ``.timeindex`` (12-byte) files."""
    out = []
    for path in sorted(root.rglob("*index")):
        entry = {".index": 8, ".timeindex": 12}.get(path.suffix)
        if not entry or path.stat().st_size < (1 << 20):
            continue
        data = path.read_bytes()
        end = len(data.rstrip(b"\0"))
        end = -(-end // entry) * entry
        path.write_bytes(data[:end])
        out.append(f"{path.relative_to(root)}: {len(data)} -> {end} bytes")
    return out


def record(version: str, seed: int, episodes: list[str], dest: Path) -> Path:
    target = dest / f"kafka-{version}-seed{seed}"
    work = Path(tempfile.mkdtemp(prefix="koa-record-"))
    original = scenario.plan_episodes
    scenario.plan_episodes = lambda rng, unclean: list(episodes)
    try:
        sc = scenario.run_scenario(seed, version, work, hot_copy=False)
    finally:
        scenario.plan_episodes = original
    scenario.finish(sc)
    shutil.rmtree(target, ignore_errors=True)
    for node in sc.cluster.nodes.values():
        shutil.copytree(node.log_dir, target / "brokers" / node.dir.name, ignore=shutil.ignore_patterns(".lock"))
    trimmed = trim_preallocated_indexes(target / "brokers")
    (target / "scenario.json").write_text(
        json.dumps(
            {
                "seed": seed,
                "version": version,
                "episodes": sc.episodes,
                "judged": sc.judged,
                "verdicts": sc.verdicts,
                "schedule": sc.steps,
            },
            indent=1,
            default=str,
        )
    )
    (target / "README.md").write_text(
        f"# Kafka {version} lab scenario, seed {seed}\n\n"
        f"Recorded {time.strftime('%Y-%m-%d')} by `python -m tests.lab.record --version {version} --seed {seed} "
        f"--episodes {','.join(episodes)}`: a KRaft cluster of one controller (node 100) and three brokers, "
        f"Kafka {version} from Maven Central (`tests/lab/pom.xml`), driven by `tests/lab/scenario.py` "
        f"(episodes: {', '.join(sc.episodes)}). `brokers/` holds every node's log dir after a clean shutdown, "
        "byte for byte as the brokers wrote them. `scenario.json` holds the schedule (every step with its "
        "time and result) and, per group-partition, the verdict of Kafka's own Java consumer "
        "(`tests/lab/java/LabClient.java` `verdicts`: resume from the committed offset and leader epoch with "
        "`auto.offset.reset=none`), taken with the cluster up before the shutdown.\n\n"
        f"One change to the bytes: the KRaft metadata log's active segment keeps its `.index` and "
        f"`.timeindex` preallocated (10 MiB of zeros each) after a clean shutdown; their zero padding was cut "
        f"off the end ({trimmed}), as the broker itself does when it closes a segment.\n"
    )
    shutil.rmtree(work, ignore_errors=True)
    return target


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.lab.record")
    ap.add_argument("--version", required=True)
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--episodes", default="unclean,upgrade,txn,delete_records,stale_epoch")
    ap.add_argument("--dest", default="tests/data/lab-scenarios")
    args = ap.parse_args(argv)
    print(record(args.version, args.seed, args.episodes.split(","), Path(args.dest)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
