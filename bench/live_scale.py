"""Live audits at production scale, against Kafka's own tools on the same cluster, in one run (figures, not a test).

    python -m bench.live_scale --out bench/live_scale                  # 20M commit records; about 30 minutes here
    python -m bench.live_scale --quick --out /tmp/koa-bench/scale      # checks the script with small numbers

The cluster (built once, measured twice): the lab's 3-broker KRaft cluster (``tests/lab``, Kafka from Maven
Central) with ``__consumer_offsets`` of 50 partitions whose log cleaner is held back
(``log.cleaner.min.compaction.lag.ms``: a day), so the topic holds every record written.  It first runs a lab
scenario (``tests/lab/scenario.py``, seed 1: unclean elections, truncations, transactional commits; Kafka's
consumer judges its groups), so the findings are real ones; then ``--topics`` topics of 2 partitions, ``--small``
groups that each commit the 2 partitions of one topic, and ``--big`` groups that each commit every partition of
every topic in one OffsetCommit request (Java ``Admin.alterConsumerGroupOffsets``, groups with no members) until
``__consumer_offsets`` holds ``--n-small`` and then ``--n-large`` commit records.

At each size, one after the other (one process at a time, fresh processes):

* the whole live audit (``kafka-offset-audit audit --bootstrap-servers ...``, reports on) with each ``--source``;
* ``kafka-consumer-groups --describe --all-groups`` (Kafka's ConsumerGroupCommand): what operators run to see
  every group's position;
* ``kafka-console-consumer`` reading all of ``__consumer_offsets`` (``read_committed``) with Kafka's offsets
  formatter into /dev/null, ``--max-messages`` the record count, so it stops when done;
* the live source's read alone (``kafka_offsets_topic``, decoded, counted) in a started Spark session.

Memory: the peak RSS of the audit's driver Python, its driver JVM and its largest Python worker, sampled from
``/proc`` every 0.2 s.  At ``--n-large``: the brokers' request logs (``kafka.request.logger`` at DEBUG, switched
on live for that run only) give the audit's requests per API per broker, connections and peak in flight; then a
client quota (``consumer_byte_rate``) on the audit's ``client.id`` slows a run that must still succeed.  Last, the
cluster stops cleanly and the offline audit reads its log dirs.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CLIENT_ID = "koa-scale"
#: (fetch.max.bytes, max.partition.fetch.bytes) the audit sends: Java's defaults (the bench's client config sets none)
FETCH_SIZES = (52_428_800, 1_048_576)
CLUSTER_OPTIONS = {
    "heap": "1g",
    "overrides": {
        "broker": {
            "offsets.topic.num.partitions": 50,
            "offsets.topic.segment.bytes": 100 << 20,
            "log.cleaner.min.compaction.lag.ms": 86_400_000,
            "offsets.retention.minutes": 10080,
        }
    },
}


class TreeSampler:
    """Peak RSS (MiB) of a process and its descendants, by kind: the root (driver Python), ``java`` processes
    (the driver JVM) and the largest single ``pyspark`` Python worker."""

    def __init__(self, pid: int, interval: float = 0.2):
        self.pid, self.interval = pid, interval
        self.peak = {"driver_python": 0.0, "driver_jvm": 0.0, "python_worker": 0.0}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    @staticmethod
    def _stat(pid: int) -> tuple[int, float, str] | None:
        try:
            status = Path(f"/proc/{pid}/status").read_text()
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            return None
        ppid = int(next(x for x in status.splitlines() if x.startswith("PPid:")).split()[1])
        rss = next((x for x in status.splitlines() if x.startswith("VmRSS:")), "VmRSS: 0 kB")
        return ppid, int(rss.split()[1]) / 1024, cmd

    def _loop(self):
        while not self._stop.is_set():
            procs = {}
            for d in os.listdir("/proc"):
                if d.isdigit():
                    st = self._stat(int(d))
                    if st:
                        procs[int(d)] = st
            tree, grew = {self.pid}, True
            while grew:
                more = {p for p, (pp, _, _) in procs.items() if pp in tree and p not in tree}
                tree |= more
                grew = bool(more)
            for p in tree:
                if p not in procs:
                    continue
                _, rss, cmd = procs[p]
                kind = (
                    "driver_python"
                    if p == self.pid
                    else "driver_jvm"
                    if cmd.split(" ")[0].endswith("java")
                    else "python_worker"
                    if "pyspark" in cmd
                    else None
                )
                if kind:
                    self.peak[kind] = max(self.peak[kind], rss)
            self._stop.wait(self.interval)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


def timed(cmd: list[str], env: dict | None = None, sample: bool = False, stdout=subprocess.DEVNULL) -> dict:
    t = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=stdout, stderr=subprocess.PIPE, text=True, env=env)
    sampler = TreeSampler(proc.pid) if sample else None
    if sampler:
        sampler.__enter__()
    _, err = proc.communicate()
    wall = time.perf_counter() - t
    if sampler:
        sampler.__exit__()
    out = {"wall_s": round(wall, 2), "exit": proc.returncode}
    if sampler:
        out["peak_rss_mib"] = {k: round(v, 1) for k, v in sampler.peak.items()}
    if proc.returncode not in (0, 1):
        out["error"] = err[-3000:]
    return out


def audit_cmd(bootstrap: str, out: Path, source: str, props: Path) -> list[str]:
    return [
        sys.executable,
        "-m",
        "audit.cli",
        "audit",
        "--bootstrap-servers",
        bootstrap,
        "--client-config",
        str(props),
        "--source",
        source,
        "--output",
        str(out),
        "--quiet",
    ]


READ_ONLY = """
import sys, time
from audit.spark import build_session
spark = build_session("local[2]", "koa-read-only")
from audit.sources.kafka_datasource import register
register(spark)
t = time.perf_counter()
n = (spark.read.format("kafka_offsets_topic").option("bootstrap.servers", sys.argv[1])
     .option("client.properties", sys.argv[2]).option("decoded", "true").load()
     .where("kind = 'record'").count())
print(n, round(time.perf_counter() - t, 2))
"""


def fill(lab, groups: list[str], topics: list[list[str]], target: int, done: int) -> int:
    """Commit with ``groups`` (each: every partition of its topics) until ``done`` reaches ``target`` records."""
    per = sum(len(t) for t in topics) * 2
    rounds = max(0, (target - done) // per)
    if rounds:
        r = lab.call("bulk_commit", groups=groups, topics=topics, partitions=2, rounds=rounds, offset=0, epoch=0)
        assert not r["errors"], r
        done += r["records"]
    left = target - done
    if left > 0:
        k = -(-left // (len(topics[0]) * 2))
        r = lab.call("bulk_commit", groups=groups[:k], topics=topics[:k], partitions=2, rounds=1, offset=0, epoch=0)
        assert not r["errors"], r
        done += r["records"]
    return done


def marks_of(cluster) -> dict[int, int]:
    return {n.node_id: n.log_file.stat().st_size for n in cluster.broker_nodes()}


def measure(label: str, cluster, lab, props: Path, work: Path, sources: list[str], version: str) -> dict:
    from tests.lab import kafka_dist

    env = {**os.environ, "PYTHONPATH": str(REPO)}
    row: dict = {"label": label}
    for source in sources:
        r = timed(audit_cmd(cluster.bootstrap, work / f"out-{label}-{source}", source, props), env, sample=True)
        summary = work / f"out-{label}-{source}" / "summary.json"
        if summary.exists():
            s = json.loads(summary.read_text())
            r["records_read"] = (s.get("records_read") or {}).get("total")
            r["findings"] = s.get("findings", {}).get("total") if isinstance(s.get("findings"), dict) else None
        row[f"audit_{source}"] = r
        print(f"[scale] {label}: audit --source {source}: {r}", flush=True)
    proc = subprocess.run(
        [sys.executable, "-c", READ_ONLY, cluster.bootstrap, str(props)], capture_output=True, text=True, env=env
    )
    n, secs = proc.stdout.split()[-2:] if proc.returncode == 0 else ("0", "nan")
    row["read_only"] = {
        "records": int(n),
        "seconds": float(secs),
        "error": proc.stderr[-2000:] if proc.returncode else None,
    }
    print(f"[scale] {label}: kafka_offsets_topic read alone: {row['read_only']}", flush=True)
    tools = f"{kafka_dist.tools_classpath(version)}/*"
    java = kafka_dist.java()
    row["consumer_groups_describe"] = timed(
        [
            java,
            "-cp",
            tools,
            "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
            "--bootstrap-server",
            cluster.bootstrap,
            "--describe",
            "--all-groups",
            "--timeout",
            "120000",
        ]
    )
    print(
        f"[scale] {label}: kafka-consumer-groups --describe --all-groups: {row['consumer_groups_describe']}", flush=True
    )
    row["console_consumer"] = timed(
        [
            java,
            "-cp",
            tools,
            "org.apache.kafka.tools.consumer.ConsoleConsumer",
            "--bootstrap-server",
            cluster.bootstrap,
            "--topic",
            "__consumer_offsets",
            "--from-beginning",
            "--isolation-level",
            "read_committed",
            "--formatter",
            "org.apache.kafka.tools.consumer.OffsetsMessageFormatter",
            "--max-messages",
            str(row["read_only"]["records"]),
            "--consumer-property",
            "exclude.internal.topics=false",
            "--timeout-ms",
            "60000",
        ]
    )
    print(f"[scale] {label}: kafka-console-consumer of __consumer_offsets: {row['console_consumer']}", flush=True)
    return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.live_scale", description=__doc__.split("\n\n")[0])
    ap.add_argument("--version", default="4.4.0")
    ap.add_argument("--n-small", type=int, default=1_000_000)
    ap.add_argument("--n-large", type=int, default=20_000_000)
    ap.add_argument("--topics", type=int, default=1000)
    ap.add_argument("--small", type=int, default=10_000, help="groups committing one topic each")
    ap.add_argument("--big", type=int, default=90, help="groups committing every topic")
    ap.add_argument("--sources", default="kafka-python,kafka-connector")
    ap.add_argument("--quota", type=float, default=20 * 1024 * 1024, help="consumer_byte_rate on the audit, bytes/s")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--keep", action="store_true", help="keep the work dir (the cluster's log dirs, the outputs)")
    ap.add_argument("--out", default="bench/live_scale")
    a = ap.parse_args(argv)
    if a.quick:
        a.n_small, a.n_large, a.topics, a.small, a.big = 20_000, 100_000, 20, 100, 5
    sys.path.insert(0, str(REPO))
    from bench.live_load import load_of
    from tests.lab import scenario

    work = Path(tempfile.mkdtemp(prefix="koa-live-scale-"))
    props = work / "audit.properties"
    props.write_text(f"client.id={CLIENT_ID}\n")
    sources = [s for s in a.sources.split(",") if s]
    res: dict = {
        "started": time.strftime("%Y-%m-%d %H:%M:%S"),
        "version": a.version,
        "cpus": os.cpu_count(),
        "quick": a.quick,
        "args": vars(a),
        "rows": [],
    }
    t0 = time.monotonic()
    sc = scenario.run_scenario(1, a.version, work / "scenario", hot_copy=False, cluster_options=CLUSTER_OPTIONS)
    cluster, lab = sc.cluster, sc.client
    try:
        res["scenario_s"] = round(time.monotonic() - t0, 1)
        topics = [f"scale-{i:04d}" for i in range(a.topics)]
        for lo in range(0, len(topics), 200):
            lab.call("create_topics", names=topics[lo : lo + 200], partitions=2, rf=1)
        small = [f"scale-small-{i:05d}" for i in range(a.small)]
        big = [f"scale-big-{i:03d}" for i in range(a.big)]
        t1 = time.monotonic()
        r = lab.call(
            "bulk_commit",
            groups=small,
            topics=[[topics[i % len(topics)]] for i in range(a.small)],
            partitions=2,
            rounds=1,
            offset=0,
            epoch=0,
        )
        assert not r["errors"], r
        done = r["records"]
        res["shape"] = {
            "topics": a.topics + len(sc.topics) if hasattr(sc, "topics") else a.topics,
            "groups": a.small + a.big,
            "group_partitions": a.small * 2 + a.big * a.topics * 2,
        }
        for label, target in (("small", a.n_small), ("large", a.n_large)):
            t2 = time.monotonic()
            done = fill(lab, big, [topics] * a.big, target, done)
            res[f"fill_{label}_s"] = round(time.monotonic() - t2, 1)
            print(f"[scale] {done:,} bench commit records written ({res[f'fill_{label}_s']} s)", flush=True)
            row = measure(label, cluster, lab, props, work, sources, a.version)
            row["bench_records_written"] = done
            res["rows"].append(row)
        res["fill_s"] = round(time.monotonic() - t1, 1)
        # what the brokers see of one audit at the large size
        for n in cluster.broker_nodes():
            lab.call("set_logger", broker=str(n.node_id), logger="kafka.request.logger", level="DEBUG")
        marks = marks_of(cluster)
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        res["logged_run"] = timed(audit_cmd(cluster.bootstrap, work / "out-logged", "kafka-python", props), env)
        for n in cluster.broker_nodes():
            lab.call("set_logger", broker=str(n.node_id), logger="kafka.request.logger", level="WARN")
        res["brokers"] = load_of(cluster, marks, CLIENT_ID)
        print(f"[scale] brokers saw: {json.dumps(res['brokers'])}", flush=True)
        lab.call("set_quota", client_id=CLIENT_ID, key="consumer_byte_rate", rate=a.quota)
        time.sleep(2)
        res["quota_run"] = timed(audit_cmd(cluster.bootstrap, work / "out-quota", "kafka-python", props), env)
        res["quota_run"]["consumer_byte_rate"] = a.quota
        lab.call("set_quota", client_id=CLIENT_ID, key="consumer_byte_rate", rate=None)
        print(f"[scale] with a {a.quota:,.0f} B/s quota: {res['quota_run']}", flush=True)
    finally:
        scenario.finish(sc)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    res["offline"] = timed(
        [
            sys.executable,
            "-m",
            "audit.cli",
            "audit",
            "--log-dirs",
            *map(str, cluster.log_dirs()),
            "--output",
            str(work / "out-offline"),
            "--quiet",
        ],
        env,
        sample=True,
    )
    print(f"[scale] offline audit of the log dirs after a clean shutdown: {res['offline']}", flush=True)
    res["finished"] = time.strftime("%Y-%m-%d %H:%M:%S")
    out = Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(res, indent=2))
    print(table(res))
    if not a.keep:  # the cluster's log dirs: about 5 GB at 20M records
        import shutil

        shutil.rmtree(work, ignore_errors=True)
    return 0


def table(res: dict) -> str:
    """The measures, one row each: figure, target, verdict."""
    rows_by = {r["label"]: r for r in res["rows"]}
    small, large = rows_by["small"], rows_by["large"]
    n_s, n_l = small["read_only"]["records"], large["read_only"]["records"]
    describe = large["consumer_groups_describe"]["wall_s"]
    rows = []
    for key in [k for k in large if k.startswith("audit_")]:
        source = key[len("audit_") :]
        a_s, a_l = small[key], large[key]
        ok = a_l.get("exit") in (0, 1)
        rows.append(
            (
                f"1 | live audit --source {source}, reports on, {n_l:,} records ÷ kafka-consumer-groups --describe "
                "--all-groups",
                f"{a_l['wall_s']:.1f} s ÷ {describe:.1f} s = {a_l['wall_s'] / describe:.2f}x",
                "< 1x",
                ok and a_l["wall_s"] < describe,
            )
        )
        dt = a_l["wall_s"] - a_s["wall_s"]
        rate = (n_l - n_s) / dt if dt > 0 else None  # not slower: noise swamped the difference, nothing measured
        rows.append(
            (
                f"2 | marginal read rate, --source {source}: ({n_l:,} - {n_s:,}) ÷ ({a_l['wall_s']:.1f} - "
                f"{a_s['wall_s']:.1f} s)",
                f"{rate:,.0f} records/s" if rate is not None else "not measured: the larger run was not slower",
                ">= 1,000,000/s",
                ok and rate is not None and rate >= 1_000_000,
            )
        )
        for kind in ("driver_python", "driver_jvm", "python_worker"):
            lo, hi = a_s["peak_rss_mib"][kind], a_l["peak_rss_mib"][kind]
            g = hi / lo if lo else float("inf")
            rows.append(
                (
                    f"3 | --source {source}: {kind.replace('_', ' ')} peak RSS, {n_s:,} -> {n_l:,} records",
                    f"{lo:.0f} -> {hi:.0f} MiB = {g:.2f}x",
                    "<= 1.5x",
                    g <= 1.5,
                )
            )
    ro, cc = large["read_only"]["seconds"], large["console_consumer"]["wall_s"]
    rows.append(
        (
            f"1 | read of __consumer_offsets alone ({n_l:,} records, kafka_offsets_topic in a started session) ÷ "
            "kafka-console-consumer with the offsets formatter (its JVM start included)",
            f"{ro:.1f} s ÷ {cc:.1f} s = {ro / cc:.2f}x",
            "<= 1x",
            ro <= cc,
        )
    )
    live, off = large["audit_kafka-python"]["wall_s"], res["offline"]["wall_s"]
    rows.append(
        (
            "2 | live audit ÷ offline audit of the same cluster's log dirs after a clean shutdown",
            f"{live:.1f} s ÷ {off:.1f} s = {live / off:.2f}x",
            "<= 2x",
            live <= 2 * off,
        )
    )
    groups = res["shape"]["groups"]
    for node, b in sorted(res["brokers"].items()):
        # batched: no kind of request as many as the groups (one per group or group-partition would be), and every
        # Fetch sized by the settings the docs name (Java's defaults; the bench's client config sets none)
        per_group = [api for api, n in b["requests"].items() if n >= groups]
        sizes = {tuple(x) for x in b["fetch_max_bytes"]}
        rows.append(
            (
                f"4 | broker {node}: the audit's requests (request log), connections, peak in flight, Fetch sizes",
                f"{b['requests']}, {b['connections']} connections, peak {b['peak_in_flight']}, "
                f"(fetch.max.bytes, max.partition.fetch.bytes) {b['fetch_max_bytes']}",
                f"each API < {groups:,} requests; Fetch sizes {FETCH_SIZES}",
                not per_group and sizes <= {FETCH_SIZES},
            )
        )
    q = res["quota_run"]
    rows.append(
        (
            f"4 | consumer_byte_rate quota of {q['consumer_byte_rate']:,.0f} B/s on the audit's client.id",
            f"{q['wall_s']:.1f} s (without: {res['logged_run']['wall_s']:.1f} s), exit {q['exit']}",
            "slower, never fails",
            q["exit"] in (0, 1) and q["wall_s"] > res["logged_run"]["wall_s"],
        )
    )
    w = [max(len(r[i]) for r in rows) for i in range(3)]
    out = [
        f"live scale, one run ({res['started']} -> {res['finished']}, Kafka {res['version']}, {res['cpus']} CPUs; "
        f"{res['shape']['groups']:,} bench groups, {res['shape']['group_partitions']:,} group-partitions, "
        f"cluster built in {res['scenario_s'] + res['fill_s']:.0f} s)"
        + (" -- QUICK: small inputs, not the measures" if res["quick"] else ""),
        f"{'measure':{w[0]}} | {'figure':{w[1]}} | {'target':{w[2]}} | verdict",
        f"{'-' * w[0]}-+-{'-' * w[1]}-+-{'-' * w[2]}-+--------",
    ]
    out += [f"{m:{w[0]}} | {f:{w[1]}} | {t:{w[2]}} | {'PASS' if ok else 'FAIL'}" for m, f, t, ok in rows]
    return "\n".join(out)


if __name__ == "__main__":
    sys.exit(main())
