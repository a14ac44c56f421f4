"""The load a live audit puts on a real cluster, as the brokers saw it.

    python -m bench.live_load --version 4.4.0 --groups 500 --topics 50 --partitions 10 \\
        --concurrency 1,4,16 --out bench/live_load

Starts a lab KRaft cluster (``tests/lab``: one controller, three brokers, Kafka from Maven Central) with
``kafka.request.logger`` at DEBUG, creates ``--topics`` topics of ``--partitions`` partitions and ``--groups``
consumer groups that each commit every partition of one topic (500 groups x 10 partitions = 5,000
group-partitions), then runs the live audit once per ``--max-concurrency`` value, each in a fresh process
(``kafka-offset-audit audit --bootstrap-servers ... --skip-reports``, Spark start-up included in the wall
time), with ``client.id=koa-load`` so its requests can be told from the brokers' own.

From every broker's request log it prints and writes (``OUT.md`` / ``OUT.json``): requests of each kind per
broker, distinct connections, and the peak number of connections open at once (a connection counts as open
from the start of its first request to the end of its last; the request log gives each request's end time
and duration).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

CLIENT_ID = "koa-load"


def _requests(text: str) -> list[tuple[float, dict]]:
    """(end time in s, request JSON) of every completed request in a broker log."""
    out, dec = [], json.JSONDecoder()
    for line in text.splitlines():
        i = line.find("Completed request:")
        if i < 0 or not line.startswith("["):
            continue
        try:
            end = dt.datetime.strptime(line[1:24], "%Y-%m-%d %H:%M:%S,%f").timestamp()
            obj, _ = dec.raw_decode(line[line.find("{", i) :])
        except ValueError:
            continue
        out.append((end, obj))
    return out


def peak_open(intervals: list[tuple[float, float]]) -> int:
    """Most intervals open at one instant (start inclusive, end inclusive)."""
    events = sorted([(s, 1) for s, _ in intervals] + [(e, -1) for _, e in intervals], key=lambda x: (x[0], -x[1]))
    best = cur = 0
    for _, d in events:
        cur += d
        best = max(best, cur)
    return best


def load_of(cluster, marks: dict[int, int], client_id: str = CLIENT_ID) -> dict:
    """The requests of ``client_id`` on each broker since ``marks`` (log file offsets): per kind, connections, the
    peak of connections open and of requests in flight at once, and the (``maxBytes``, largest
    ``partitionMaxBytes``) pairs of its Fetch requests."""
    per_broker = {}
    for n in cluster.broker_nodes():
        with open(n.log_file, "rb") as fh:
            fh.seek(marks[n.node_id])
            reqs = [
                (end, r)
                for end, r in _requests(fh.read().decode(errors="replace"))
                if r["requestHeader"].get("clientId") == client_id
            ]
        kinds = Counter(r["requestHeader"]["requestApiKeyName"] for _, r in reqs)
        conns: dict[str, list[float]] = defaultdict(lambda: [float("inf"), 0.0])
        spans = []
        for end, r in reqs:
            start = end - float(r.get("totalTimeMs", 0)) / 1000
            spans.append((start, end))
            c = conns[r.get("connection", "?")]
            c[0], c[1] = min(c[0], start), max(c[1], end)
        fetch_sizes = {
            (
                r.get("request", {}).get("maxBytes"),
                max(
                    (
                        p.get("partitionMaxBytes", 0)
                        for t in r.get("request", {}).get("topics", [])
                        for p in t.get("partitions", [])
                    ),
                    default=None,
                ),
            )
            for _, r in reqs
            if r["requestHeader"]["requestApiKeyName"] == "FETCH"
        }
        per_broker[n.node_id] = {
            "requests": dict(sorted(kinds.items())),
            "total": sum(kinds.values()),
            "connections": len(conns),
            "peak_open_connections": peak_open(list(map(tuple, conns.values()))),
            "peak_in_flight": peak_open(spans),
            "fetch_max_bytes": sorted(f for f in fetch_sizes if f[0] is not None),
        }
    return per_broker


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.live_load", description=__doc__.split("\n\n")[0])
    ap.add_argument("--version", default=None, help="Kafka version (default: the newest the lab has)")
    ap.add_argument("--groups", type=int, default=500)
    ap.add_argument("--topics", type=int, default=50)
    ap.add_argument("--partitions", type=int, default=10)
    ap.add_argument("--concurrency", default="1,4,16", help="--max-concurrency values, comma-separated")
    ap.add_argument("--out", default="bench/live_load")
    args = ap.parse_args(argv)
    repo = Path(__file__).resolve().parents[1]
    sys.path.insert(0, str(repo))
    from tests.lab import kafka_dist
    from tests.lab.client import LabClient
    from tests.lab.cluster import KafkaCluster

    version = args.version or kafka_dist.versions()[0]
    work = Path(tempfile.mkdtemp(prefix="koa-live-load-"))
    cluster = KafkaCluster(
        version, work / "cluster", brokers=3, heap="512m", loggers={"kafka.request.logger": "DEBUG"}
    ).start()
    runs = []
    try:
        topics = [f"load-{i:03d}" for i in range(args.topics)]
        t0 = time.monotonic()
        with LabClient(version, cluster.bootstrap, log=work / "labclient.log") as lab:
            lab.call("create_topics", names=topics, partitions=args.partitions, rf=3)
            for t in topics:
                for p in range(args.partitions):
                    lab.call("produce", topic=t, partition=p, count=10, acks="1")
            for g in range(args.groups):
                t = topics[g % len(topics)]
                # a standalone commit (no group join) with the leader epoch, as a consumer commits
                lab.call(
                    "commit",
                    group=f"load-group-{g:04d}",
                    offsets=[{"topic": t, "partition": p, "offset": 5, "epoch": 0} for p in range(args.partitions)],
                )
        setup = time.monotonic() - t0
        props = work / "client.properties"
        props.write_text(f"client.id={CLIENT_ID}\n")
        env = dict(os.environ, PYSPARK_PYTHON=sys.executable)
        for conc in [int(c) for c in args.concurrency.split(",") if c.strip()]:
            marks = {n.node_id: n.log_file.stat().st_size for n in cluster.broker_nodes()}
            out = work / f"out-{conc}"
            started = time.monotonic()
            proc = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "audit.cli",
                    "audit",
                    "--bootstrap-servers",
                    cluster.bootstrap,
                    "--client-config",
                    str(props),
                    "--output",
                    str(out),
                    "--skip-reports",
                    "--quiet",
                    "--fail-on",
                    "never",
                    "--max-concurrency",
                    str(conc),
                    "--master",
                    "local[2]",
                ],
                cwd=repo,
                env=env,
                capture_output=True,
                text=True,
            )
            wall = time.monotonic() - started
            if proc.returncode not in (0, 1):
                raise SystemExit(f"audit failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
            time.sleep(1.5)  # the request log is written after the response
            summary = json.loads((out / "summary.json").read_text())
            runs.append(
                {
                    "max_concurrency": conc,
                    "wall_seconds": round(wall, 1),
                    "group_partitions": summary["offset_commits"]["group_partitions"],
                    "brokers": load_of(cluster, marks),
                }
            )
            print(json.dumps(runs[-1]), flush=True)
    finally:
        cluster.stop()
    result = {
        "kafka_version": version,
        "groups": args.groups,
        "topics": args.topics,
        "partitions": args.partitions,
        "setup_seconds": round(setup, 1),
        "machine": f"{os.cpu_count()} cores",
        "runs": runs,
    }
    Path(args.out + ".json").write_text(json.dumps(result, indent=2) + "\n")
    Path(args.out + ".md").write_text(_markdown(result))
    print(_markdown(result))
    return 0


def _markdown(r: dict) -> str:
    kinds = sorted({k for run in r["runs"] for b in run["brokers"].values() for k in b["requests"]})
    lines = [
        f"# Live audit load on a 3-broker Kafka {r['kafka_version']} cluster",
        "",
        f"{r['groups']} groups, {r['topics']} topics x {r['partitions']} partitions; "
        f"`python -m bench.live_load` on {r['machine']}. Requests are those with the audit's client.id, "
        "counted in each broker's request log.",
        "",
        "| max concurrency | wall s | group-partitions | broker | "
        + " | ".join(kinds)
        + " | connections | peak open |",
        "|---" * (6 + len(kinds)) + "|",
    ]
    for run in r["runs"]:
        for b, v in sorted(run["brokers"].items(), key=lambda kv: int(kv[0])):
            lines.append(
                f"| {run['max_concurrency']} | {run['wall_seconds']} | {run['group_partitions']} | {b} | "
                + " | ".join(str(v["requests"].get(k, 0)) for k in kinds)
                + f" | {v['connections']} | {v['peak_open_connections']} |"
            )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
