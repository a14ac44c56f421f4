"""Session fixtures for Spark processes the tests start from pyspark's own jars: a standalone master with two
workers, a Spark Connect server, and the packed executors' environment (the README's ``cluster-package`` block).

Each is started once per test run (session scope) and shared by every module that uses it; their Python (the
workers', the Connect server's Python workers) is an empty virtual environment: no project, no numpy, no pyarrow.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from .ports import free_port
from .test_readme_commands import readme_blocks


def spark_script(name: str) -> str:
    path = shutil.which(name, path=os.path.dirname(sys.executable))
    assert path, f"{name} comes with the pyspark package"
    return path


def wait_for(what: str, cond, timeout: float = 90, proc=None, log: Path | None = None):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        if proc is not None and proc.poll() is not None:
            break
        time.sleep(0.5)
    raise AssertionError(f"{what} not reached in {timeout}s" + (f":\n{log.read_text()[-3000:]}" if log else ""))


def empty_venv(base: Path) -> Path:
    """A virtual environment with nothing installed; returns its python."""
    empty = base / "empty-venv"
    subprocess.run(
        [getattr(sys, "_base_executable", sys.executable), "-m", "venv", "--without-pip", str(empty)], check=True
    )
    py = empty / "bin" / "python"
    assert subprocess.run([str(py), "-c", "import numpy"], capture_output=True).returncode != 0
    return py


def spark_env(python: Path) -> dict:
    """The environment of a Spark process started from pyspark's jars, its Python workers on ``python``."""
    import pyspark

    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "SPARK_HOME", "SPARK_REMOTE")}
    # SPARK_HOME: pyspark's own jars (spark-class would ask PYSPARK_PYTHON, the empty venv, where pyspark is)
    env.update(
        PYSPARK_PYTHON=str(python),
        SPARK_LOCAL_IP="127.0.0.1",
        SPARK_NO_DAEMONIZE="1",
        SPARK_HOME=os.path.dirname(pyspark.__file__),
    )
    return env


def stop_processes(procs):
    """Terminate ``procs`` (newest first), then kill any still running after 30 s."""
    for p in reversed(procs):
        p.terminate()
    for p in procs:
        try:
            p.wait(30)
        except subprocess.TimeoutExpired:
            p.kill()


@pytest.fixture(scope="session")
def standalone(tmp_path_factory):
    """(master URL, work dirs of the two workers, the empty venv's python, base dir)."""
    base = tmp_path_factory.mktemp("standalone")
    empty_py = empty_venv(base)
    env = spark_env(empty_py)
    port = free_port()
    procs = []
    try:
        mlog = base / "master.log"
        master = subprocess.Popen(
            [
                spark_script("spark-class"),
                "org.apache.spark.deploy.master.Master",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--webui-port",
                str(free_port()),
            ],
            stdout=mlog.open("w"),
            stderr=subprocess.STDOUT,
            env=env,
        )
        procs.append(master)
        wait_for(
            "the master's election", lambda: "I have been elected leader" in mlog.read_text(), proc=master, log=mlog
        )
        url = f"spark://127.0.0.1:{port}"
        works = []
        for i in (1, 2):
            work = base / f"worker-{i}"
            work.mkdir()
            wlog = base / f"worker-{i}.log"
            w = subprocess.Popen(
                [
                    spark_script("spark-class"),
                    "org.apache.spark.deploy.worker.Worker",
                    url,
                    "--host",
                    "127.0.0.1",
                    "--cores",
                    "1",
                    "--memory",
                    "1500m",
                    "--work-dir",
                    str(work),
                    "--webui-port",
                    str(free_port()),
                ],
                stdout=wlog.open("w"),
                stderr=subprocess.STDOUT,
                env=env,
            )
            procs.append(w)
            wait_for(
                f"worker {i} registered",
                lambda p=wlog: "Successfully registered with master" in p.read_text(),
                proc=w,
                log=wlog,
            )
            works.append(work)
        yield url, works, empty_py, base
    finally:
        stop_processes(procs)


#: what stands for the Connect server in the README's blocks
CONNECT_PLACEHOLDER = "sc://spark-connect:15002"


@pytest.fixture(scope="session")
def connect_server(tmp_path_factory):
    """A Spark Connect server started with the README's ``connect-server`` block (local[2] master, Spark's Kafka
    connector from Maven Central) on a free loopback port: (``sc://`` URL, its log, the empty venv's python)."""
    base = tmp_path_factory.mktemp("connect")
    empty_py = empty_venv(base)
    port = free_port()
    cmd = readme_blocks()["connect-server"]
    assert cmd.startswith("spark-submit ") and "--master" not in cmd, cmd
    cmd = cmd.replace(
        "spark-submit ",
        f"{spark_script('spark-submit')} --master local[2] --driver-memory 2g "
        "--conf spark.ui.enabled=false --conf spark.connect.grpc.binding.address=127.0.0.1 "
        f"--conf spark.connect.grpc.binding.port={port} ",
        1,
    )
    log = base / "server.log"
    proc = subprocess.Popen(
        ["bash", "-c", "exec " + cmd], cwd=base, stdout=log.open("w"), stderr=subprocess.STDOUT, env=spark_env(empty_py)
    )
    try:
        wait_for(
            "the Spark Connect server",
            lambda: "Spark Connect server started" in log.read_text(),
            timeout=300,
            proc=proc,
            log=log,
        )
        yield f"sc://127.0.0.1:{port}", log, empty_py
    finally:
        stop_processes([proc])


@pytest.fixture(scope="session")
def packed_env(tmp_path_factory):
    """The README's packaging block, as written, in a scratch directory."""
    where = tmp_path_factory.mktemp("package")
    proc = subprocess.run(
        ["bash", "-c", "set -euo pipefail\n" + readme_blocks()["cluster-package"]],
        cwd=where,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    archive = where / "kafka-offset-audit-env.tar.gz"
    assert archive.is_file()
    return archive


@pytest.fixture(scope="session")
def lab_live(spark, tmp_path_factory):
    """A 3-broker lab cluster (the first lab Kafka version) where ``out_of_range_commits`` wrote to topic ``events``,
    audited live by the embedded local run: (bootstrap servers, that run's output dir).  Started once for the
    live audits on a Spark cluster, through Spark Connect and into an object store, which only read it."""
    from audit.pipeline import AuditConfig, run
    from tests.lab import kafka_dist
    from tests.lab.client import LabClient, out_of_range_commits
    from tests.lab.cluster import KafkaCluster

    base = tmp_path_factory.mktemp("lab-live")
    version = kafka_dist.versions()[0]
    cluster = KafkaCluster(version, base / "kafka", brokers=3).start()
    try:
        with LabClient(version, cluster.bootstrap, log=base / "labclient.log") as lab:
            out_of_range_commits(lab, "events")
        local = base / "local"
        run(AuditConfig(bootstrap_servers=cluster.bootstrap, output=str(local), quiet=True, reports=False), spark)
        yield cluster.bootstrap, local
    finally:
        cluster.stop()
