"""The audit on a Spark cluster and through Spark Connect, measured in one run (figures, not a test).

    python -m bench.cluster_modes --output /tmp/koa-bench/cluster.json          # about 25 minutes here
    python -m bench.cluster_modes --quick --output /tmp/koa-bench/cluster-quick.json   # checks the script only
    python -m bench.cluster_modes --connect-only --connect-warmup 12 --pairs 3     # measure 3 alone, a warmer server
    python -m bench.cluster_modes --connect-only --connect-python-env env.tar.gz  # ... the way docs/spark-cluster.md runs it

Three measures, one table:

1. **Standalone ÷ local**: ``audit.pipeline.run()`` of the benchmark's N-commit log dir (:mod:`bench.generate`,
   default 100,000,000 commits) on a standalone master with two workers (one core each, started here from
   pyspark's own jars, on this machine) against ``local[2]``, alternated ``--pairs`` times, medians of
   ``run()``'s seconds (:mod:`bench.run_benchmark`'s child: a fresh process each).  On two cores no speed-up is
   possible; the target is the cluster's overhead: <= 1.3x.  A third run in each round gives the executors
   :data:`SMALL_NODE_EXECUTOR_OPTIONS` (the advice of docs/spark-cluster.md for nodes of one or two cores).
2. **Memory flat**: on the standalone cluster, the driver's Python and JVM peaks (from the child) and each
   executor JVM's and its Python workers' peak RSS (sampled here from ``/proc`` every 0.5 s: the largest one
   Python worker process, and the sum over the workers alive at once), at ``--n-small`` and ``--n-large``:
   largest ÷ smallest <= 1.5x.
3. **Connect, warm server**: the small audit of the shared scenario (reports on) by a fresh CLI process with
   ``--remote`` against a Spark Connect server that has already run ``--connect-warmup`` audits (default 1; no JVM
   start to pay, and a server in service has run many), ÷ the bare
   Spark process of :mod:`bench.small_audit` (a fresh ``local[2]`` session, one ``mapInArrow`` job, one Parquet
   write), alternated, medians: <= 0.7x.  With ``--connect-python-env ARCHIVE`` (``kafka-offset-audit package``'s
   archive), each audit passes it as ``--python-env``, as docs/spark-cluster.md does: the archive is uploaded
   into each audit's session and unpacked by its executors.

The cluster's and the server's Python is this interpreter (the project installed): without
``--connect-python-env`` the measures are about where Spark runs, not about shipping the environment
(``tests/spark/test_spark_standalone.py`` and ``tests/spark/test_spark_connect.py`` prove the empty-executor paths).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SCENARIO = REPO.parent / "shared" / "data" / "scenarios" / "unclean-election-3brokers" / "brokers"
TARGETS = {"standalone_ratio": 1.3, "memory_growth": 1.5, "connect_ratio": 0.7}
#: what docs/spark-cluster.md ("Run on a Spark cluster") gives for executors on nodes of one or two cores: one JIT compiler
#: thread, C1 only, the serial collector (the JVM sizes its JIT and GC threads by the node's cores, not the
#: executor's, and on a 2-core node they take the cores from the tasks)
SMALL_NODE_EXECUTOR_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:CICompilerCount=1 -XX:+UseSerialGC"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _spark_env() -> dict:
    import pyspark

    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "SPARK_REMOTE")}
    env.update(
        SPARK_HOME=os.path.dirname(pyspark.__file__),
        PYSPARK_PYTHON=sys.executable,
        SPARK_LOCAL_IP="127.0.0.1",
        SPARK_NO_DAEMONIZE="1",
    )
    return env


def _wait_log(log: Path, text: str, proc, timeout: float = 300) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if text in log.read_text(errors="replace"):
            return
        if proc.poll() is not None:
            break
        time.sleep(0.5)
    raise SystemExit(f"{text!r} not in {log} after {timeout} s:\n{log.read_text(errors='replace')[-3000:]}")


def start_standalone(work: Path, memory: str) -> tuple[str, list]:
    """A master and two one-core workers on loopback; returns (URL, processes)."""
    bin_dir = os.path.dirname(sys.executable)
    env, port, procs = _spark_env(), _free_port(), []
    mlog = work / "master.log"
    procs.append(
        subprocess.Popen(
            [
                os.path.join(bin_dir, "spark-class"),
                "org.apache.spark.deploy.master.Master",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--webui-port",
                str(_free_port()),
            ],
            stdout=mlog.open("w"),
            stderr=subprocess.STDOUT,
            env=env,
        )
    )
    _wait_log(mlog, "I have been elected leader", procs[0])
    url = f"spark://127.0.0.1:{port}"
    for i in (1, 2):
        wlog = work / f"worker-{i}.log"
        (work / f"worker-{i}").mkdir(exist_ok=True)
        procs.append(
            subprocess.Popen(
                [
                    os.path.join(bin_dir, "spark-class"),
                    "org.apache.spark.deploy.worker.Worker",
                    url,
                    "--host",
                    "127.0.0.1",
                    "--cores",
                    "1",
                    "--memory",
                    memory,
                    "--work-dir",
                    str(work / f"worker-{i}"),
                    "--webui-port",
                    str(_free_port()),
                ],
                stdout=wlog.open("w"),
                stderr=subprocess.STDOUT,
                env=env,
            )
        )
        _wait_log(wlog, "Successfully registered with master", procs[-1])
    return url, procs


def start_connect(work: Path) -> tuple[str, subprocess.Popen]:
    port = _free_port()
    log = work / "connect.log"
    proc = subprocess.Popen(
        [
            os.path.join(os.path.dirname(sys.executable), "spark-submit"),
            "--class",
            "org.apache.spark.sql.connect.service.SparkConnectServer",
            "--master",
            "local[2]",
            "--driver-memory",
            "2g",
            "--conf",
            "spark.ui.enabled=false",
            "--conf",
            "spark.connect.grpc.binding.address=127.0.0.1",
            "--conf",
            f"spark.connect.grpc.binding.port={port}",
            "spark-internal",
        ],
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
        env=_spark_env(),
        cwd=work,
    )
    _wait_log(log, "Spark Connect server started", proc)
    return f"sc://127.0.0.1:{port}", proc


def stop(procs) -> None:
    from tests.cluster_fixtures import stop_processes

    stop_processes(procs)


class ExecutorSampler:
    """Peak RSS (MiB) of every executor JVM (``CoarseGrainedExecutorBackend``) and of the Python workers
    (``pyspark.daemon``/``pyspark.worker``) started under the workers' directories, sampled from ``/proc``."""

    def __init__(self, work: Path, interval: float = 0.5):
        self.work, self.interval = str(work), interval
        self.jvm: dict[int, float] = {}
        self.python_sum = 0.0
        self.python_one = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    @staticmethod
    def _rss_mib(pid: int) -> float:
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
        except OSError:
            pass
        return 0.0

    def _loop(self) -> None:
        while not self._stop.is_set():
            py = 0.0
            for d in os.listdir("/proc"):
                if not d.isdigit():
                    continue
                try:
                    cmd = Path(f"/proc/{d}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                except OSError:
                    continue
                if "CoarseGrainedExecutorBackend" in cmd:
                    self.jvm[int(d)] = max(self.jvm.get(int(d), 0.0), self._rss_mib(int(d)))
                elif "pyspark.daemon" in cmd or "pyspark.worker" in cmd:
                    try:
                        cwd = os.readlink(f"/proc/{d}/cwd")
                    except OSError:
                        cwd = ""
                    if cwd.startswith(self.work):
                        rss = self._rss_mib(int(d))
                        py += rss
                        self.python_one = max(self.python_one, rss)
            self.python_sum = max(self.python_sum, py)
            self._stop.wait(self.interval)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()

    def result(self) -> dict:
        return {
            "executor_jvm_peak_rss_mib": round(max(self.jvm.values(), default=0.0), 1),
            "executor_python_peak_rss_sum_mib": round(self.python_sum, 1),
            "executor_python_peak_rss_one_mib": round(self.python_one, 1),
        }


def bench_run(
    n: int,
    master: str,
    cache: str,
    work: Path,
    sampler_dir: Path | None = None,
    executor_java_options: str | None = None,
) -> dict:
    """One :mod:`bench.run_benchmark` measure (its child: a fresh process, reports on) at ``n`` on ``master``;
    ``executor_java_options``: ``spark.executor.extraJavaOptions`` for it (through ``PYSPARK_SUBMIT_ARGS``, as
    ``--conf`` on the CLI gives it)."""
    out = work / f"rb-{n}-{master.split(':')[0].replace('[', '').replace(']', '')}-{time.time_ns()}.json"
    cmd = [
        sys.executable,
        "-m",
        "bench.run_benchmark",
        "--n",
        str(n),
        "--skip-naive",
        "--master",
        master,
        "--cache",
        cache,
        "--output",
        str(out),
    ]
    env = dict(os.environ, PYTHONPATH=str(REPO))
    if executor_java_options:
        env["PYSPARK_SUBMIT_ARGS"] = f'--conf "spark.executor.extraJavaOptions={executor_java_options}" pyspark-shell'

    def go():
        subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL)

    if sampler_dir is not None:
        with ExecutorSampler(sampler_dir) as s:
            go()
        extra = s.result()
    else:
        go()
        extra = {}
    row = json.loads(out.read_text())["rows"][0]
    return {
        "n": n,
        "master": master,
        "run_seconds": row["run_seconds"],
        "findings_as_expected": row["findings_as_expected"],
        "driver_python_peak_rss_mib": row["driver_python_peak_rss_mib"],
        "jvm_heap_live_at_stage_ends_mib": row["jvm_heap_live_at_stage_ends_mib"],
        **extra,
    }


def timed(cmd: list[str], env: dict | None = None) -> float:
    t = time.perf_counter()
    proc = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
    if proc.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(cmd[:6])} ... failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return time.perf_counter() - t


def standalone_measure(
    work: Path, n_large: int, n_small: int, pairs: int, cache: str, worker_memory: str
) -> tuple[dict, dict]:
    """Measures 1 and 2 on a standalone cluster started here: ``(standalone, memory)`` as :func:`print_table`
    reads them (``res["standalone"]``, ``res["memory"]``)."""
    url, procs = start_standalone(work, worker_memory)
    try:
        print(f"[cluster] standalone {url}; N={n_large:,}: local[2] and the cluster alternated", flush=True)
        runs = {"local": [], "standalone": [], "standalone_small_node": []}
        for i in range(pairs):
            for mode, master, opts in (
                ("local", "local[2]", None),
                ("standalone", url, None),
                ("standalone_small_node", url, SMALL_NODE_EXECUTOR_OPTIONS),
            ):
                r = bench_run(n_large, master, cache, work, work if mode == "standalone" else None, opts)
                runs[mode].append(r)
                print(f"[cluster]   {mode:21s} run {i + 1}: run() {r['run_seconds']} s", flush=True)
        small = bench_run(n_small, url, cache, work, work)
        print(f"[cluster]   standalone N={n_small:,}: run() {small['run_seconds']} s", flush=True)
    finally:
        stop(procs)
    med = {m: statistics.median(r["run_seconds"] for r in rs) for m, rs in runs.items()}
    large = max(runs["standalone"], key=lambda r: r["executor_jvm_peak_rss_mib"])
    standalone = {
        "runs": runs,
        "medians_s": med,
        "ratio": round(med["standalone"] / med["local"], 2),
        "ratio_small_node": round(med["standalone_small_node"] / med["local"], 2),
        "findings_as_expected": all(r["findings_as_expected"] for rs in runs.values() for r in rs),
    }
    return standalone, {"small": small, "large": large}


def connect_measure(work: Path, pairs: int, warmup: int = 1, python_env: str | None = None) -> dict:
    """Measure 3: fresh ``--remote`` CLI runs against a Connect server warmed by ``warmup`` audits, alternated with
    the bare Spark process, ``pairs`` times: ``{"warmup_runs_s", "runs", "ratio", "python_env"}`` (medians' ratio;
    ``python_env`` the archive each audit shipped as ``--python-env`` and its size in bytes, or None)."""
    conn_url, conn = start_connect(work)
    try:
        env = dict(os.environ, KOA_CDS="off")
        cli = [
            os.path.join(os.path.dirname(sys.executable), "kafka-offset-audit"),
            "audit",
            "--remote",
            conn_url,
            "--log-dirs",
            str(SCENARIO),
            "--quiet",
        ]
        if python_env:
            cli += ["--python-env", python_env]
        warm = []
        for i in range(warmup):
            warm.append(round(timed(cli + ["--output", str(work / f"connect-warm-{i}")], env), 3))
            shutil.rmtree(work / f"connect-warm-{i}", ignore_errors=True)
            print(f"[cluster] Connect {conn_url}: warming run {i + 1} of {warmup}: {warm[-1]:.2f} s", flush=True)
        times: dict[str, list[float]] = {"connect": [], "bare": []}
        for i in range(pairs):
            times["connect"].append(round(timed(cli + ["--output", str(work / f"connect-{i}")], env), 3))
            shutil.rmtree(work / f"bare-{i}", ignore_errors=True)
            times["bare"].append(
                round(
                    timed(
                        [sys.executable, "-m", "bench.small_audit", "--child-bare", str(work / f"bare-{i}")],
                        dict(os.environ, PYTHONPATH=str(REPO)),
                    ),
                    3,
                )
            )
            print(
                f"[cluster]   pair {i + 1}: Connect {times['connect'][-1]} s, bare Spark {times['bare'][-1]} s",
                flush=True,
            )
    finally:
        stop([conn])
    cm, bm = statistics.median(times["connect"]), statistics.median(times["bare"])
    env_info = {"path": python_env, "bytes": os.path.getsize(python_env)} if python_env else None
    return {"warmup_runs_s": warm, "runs": times, "ratio": round(cm / bm, 2), "python_env": env_info}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n-small", type=int, default=20_000_000)
    ap.add_argument("--n-large", type=int, default=100_000_000)
    ap.add_argument("--pairs", type=int, default=2)
    ap.add_argument("--worker-memory", default="6g")
    ap.add_argument("--cache", default=os.environ.get("KOA_BENCH_CACHE", "/tmp/koa-bench"))
    ap.add_argument("--quick", action="store_true", help="small inputs, one pair: checks the script, not a measure")
    ap.add_argument("--output", default=None)
    ap.add_argument(
        "--connect-warmup", type=int, default=1, help="audits the Connect server runs before measure 3 (default 1)"
    )
    ap.add_argument("--connect-only", action="store_true", help="measure 3 only (no standalone cluster)")
    ap.add_argument(
        "--connect-python-env",
        metavar="ARCHIVE",
        help="measure 3 with each audit shipping this archive (kafka-offset-audit package) as --python-env",
    )
    a = ap.parse_args(argv)
    if a.connect_warmup < 0:
        ap.error("--connect-warmup takes 0 or more audits")
    if a.connect_python_env and not os.path.isfile(a.connect_python_env):
        ap.error(
            f"--connect-python-env {a.connect_python_env}: no such file (build it with kafka-offset-audit package)"
        )
    if a.quick:
        a.n_small, a.n_large, a.pairs = 100_000, 400_000, 1
    work = Path(tempfile.mkdtemp(prefix="koa-cluster-bench-"))
    started = time.strftime("%Y-%m-%d %H:%M:%S")
    res: dict = {
        "started": started,
        "cpus": os.cpu_count(),
        "quick": a.quick,
        "n_small": a.n_small,
        "n_large": a.n_large,
        "pairs": a.pairs,
    }
    if not a.connect_only:
        res["standalone"], res["memory"] = standalone_measure(
            work, a.n_large, a.n_small, a.pairs, a.cache, a.worker_memory
        )
    res["connect"] = connect_measure(
        work, a.pairs, a.connect_warmup, os.path.abspath(a.connect_python_env) if a.connect_python_env else None
    )
    res["finished"] = time.strftime("%Y-%m-%d %H:%M:%S")
    print_table(res)
    if a.output:
        Path(a.output).write_text(json.dumps(res, indent=2))
    shutil.rmtree(work, ignore_errors=True)
    return 0


def _growth(small: dict, large: dict, key: str) -> tuple[str, float]:
    s, l = small.get(key) or 0.0, large.get(key) or 0.0
    g = l / s if s else float("inf")
    return f"{s:.0f} -> {l:.0f} MiB = {g:.2f}x", g


def print_table(res: dict) -> None:
    rows = _standalone_rows(res) if "standalone" in res else []
    c = res["connect"]
    rows.append(
        (
            f"shared scenario, reports on: fresh CLI --remote to a Connect server warmed by {len(c['warmup_runs_s'])} "
            "audit(s)"
            + (f", --python-env ({c['python_env']['bytes'] / 1e6:.0f} MB)" if c.get("python_env") else "")
            + f" ÷ bare Spark process, {res['pairs']} pairs, medians",
            f"{statistics.median(c['runs']['connect']):.2f} s ÷ {statistics.median(c['runs']['bare']):.2f} s = "
            f"{c['ratio']:.2f}x",
            f"<= {TARGETS['connect_ratio']}x",
            c["ratio"] <= TARGETS["connect_ratio"],
        )
    )
    w = [max(len(r[i]) for r in rows) for i in range(3)]
    print(
        f"\ncluster modes, one run ({res['started']} -> {res['finished']}, {res['cpus']} CPUs)"
        + (" -- QUICK: small inputs, not the measures" if res["quick"] else "")
    )
    print(f"{'measure':{w[0]}} | {'figure':{w[1]}} | {'target':{w[2]}} | verdict")
    print(f"{'-' * w[0]}-+-{'-' * w[1]}-+-{'-' * w[2]}-+--------")
    for m, f, t, ok in rows:
        print(f"{m:{w[0]}} | {f:{w[1]}} | {t:{w[2]}} | {'PASS' if ok else 'FAIL'}")


def _standalone_rows(res: dict) -> list[tuple]:
    rows = []
    st = res["standalone"]
    med = st["medians_s"]
    rows.append(
        (
            f"standalone (2 workers x 1 core) ÷ local[2], N={res['n_large']:,}, run(), {res['pairs']} pairs, medians",
            f"{med['standalone']:.1f} s ÷ {med['local']:.1f} s = {st['ratio']:.2f}x",
            f"<= {TARGETS['standalone_ratio']}x",
            st["ratio"] <= TARGETS["standalone_ratio"] and st["findings_as_expected"],
        )
    )
    rows.append(
        (
            "the same, executors with the small-node options of docs/spark-cluster.md (spark.executor.extraJavaOptions="
            f"{SMALL_NODE_EXECUTOR_OPTIONS})",
            f"{med['standalone_small_node']:.1f} s ÷ {med['local']:.1f} s = {st['ratio_small_node']:.2f}x",
            f"<= {TARGETS['standalone_ratio']}x",
            st["ratio_small_node"] <= TARGETS["standalone_ratio"] and st["findings_as_expected"],
        )
    )
    small, large = res["memory"]["small"], res["memory"]["large"]
    for key, what in (
        ("driver_python_peak_rss_mib", "driver Python peak RSS"),
        ("jvm_heap_live_at_stage_ends_mib", "driver JVM heap live at stage ends"),
        ("executor_jvm_peak_rss_mib", "executor JVM peak RSS"),
        ("executor_python_peak_rss_one_mib", "executors' Python workers, largest one process's peak RSS"),
        ("executor_python_peak_rss_sum_mib", "executors' Python workers, peak RSS sum"),
    ):
        fig, g = _growth(small, large, key)
        rows.append(
            (
                f"{what}, standalone, N={res['n_small']:,} -> {res['n_large']:,}",
                fig,
                f"<= {TARGETS['memory_growth']}x",
                g <= TARGETS["memory_growth"],
            )
        )
    return rows


if __name__ == "__main__":
    sys.exit(main())
