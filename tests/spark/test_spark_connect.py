"""The audit through a real Spark Connect server, from a client that has no JVM.

The server starts from pyspark's own jars with the README's ``connect-server`` block (``SparkConnectServer`` through
``spark-submit``, Spark's Kafka connector from Maven Central); its Python workers run an empty virtual environment.
The client is this test run's environment (the project with its ``connect`` extra) with no Java to start: ``java``
on its ``PATH`` fails and ``JAVA_HOME`` points nowhere, so a run that tried to start a JVM here would fail.  The
package goes to the server as a Python-file artifact and the packed environment (``kafka-offset-audit package``)
as an archive artifact; without the archive the workers cannot import pyarrow (exit status 3).  Live (both
``--source`` values) the findings equal the local run's.  The offline audit through the server is the README's
own Connect block, run from a regular install in ``tests/test_readme_commands.py`` (and the Airflow DAG's Connect
test).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ..paths import SCENARIO


def no_java_env(tmp: Path) -> dict:
    """This environment with a ``java`` that fails first on the PATH and ``JAVA_HOME`` pointing nowhere."""
    fake = tmp / "no-java"
    fake.mkdir(exist_ok=True)
    (fake / "java").write_text("#!/bin/sh\necho 'no JVM on this client' >&2\nexit 97\n")
    (fake / "java").chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k not in ("SPARK_HOME", "PYSPARK_PYTHON", "SPARK_REMOTE")}
    env.update(
        PATH=os.pathsep.join([str(fake), os.path.dirname(sys.executable), env.get("PATH", "")]),
        JAVA_HOME=str(tmp / "no-jdk-here"),
    )
    return env


def cli(tmp: Path, *args: str, env: dict | None = None, timeout: float = 900) -> subprocess.CompletedProcess:
    return subprocess.run(
        [os.path.join(os.path.dirname(sys.executable), "kafka-offset-audit"), *args],
        env=env or no_java_env(tmp),
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=tmp,
    )


def _out(proc) -> str:
    return f"exit {proc.returncode}\nstdout:\n{proc.stdout[-4000:]}\nstderr:\n{proc.stderr[-4000:]}"


def closed_sessions(log: Path) -> int:
    """How many sessions the server has closed: released by their client (``ReleaseSession``) or expired."""
    return log.read_text(errors="replace").count("Closing session with")


def assert_released(log: Path, before: int, runs: int) -> None:
    """Each of ``runs`` CLI runs released its session on the server (the server logs the close before it answers;
    a session left behind would hold its blocks, views and artifacts for the server's session timeout, an hour)."""
    assert closed_sessions(log) - before == runs, log.read_text(errors="replace")[-3000:]


def findings(spark, out: Path) -> list:
    return sorted(
        tuple(r)
        for r in spark.read.parquet(str(out / "findings"))
        .select("group_id", "topic", "partition", "finding", "severity", "committed_offset")
        .collect()
    )


def test_spark_remote_environment_variable_and_no_python_env(connect_server, tmp_path):
    """``SPARK_REMOTE`` as pyspark takes it; without ``--python-env`` the server's workers (an empty Python)
    cannot run the decode: a usage error (exit status 2) naming the missing module and the fix, nothing
    written."""
    url, log, _py = connect_server
    out = tmp_path / "out"
    env = dict(no_java_env(tmp_path), SPARK_REMOTE=url)
    before = closed_sessions(log)
    proc = cli(tmp_path, "audit", "--log-dirs", str(SCENARIO / "brokers"), "--output", str(out), env=env)
    assert proc.returncode == 2, _out(proc)
    assert_released(log, before, 1)  # a failed run too
    line = [x for x in proc.stderr.splitlines() if x.startswith("kafka-offset-audit: error:")]
    assert line and "cannot import" in line[-1] and "--python-env" in line[-1], _out(proc)
    assert "kafka-offset-audit package" in line[-1], _out(proc)
    assert not out.exists()


@pytest.mark.parametrize(
    "args, message",
    [
        (["--remote", "sc://127.0.0.1:1", "--master", "local[1]"], "--remote and --master exclude each other"),
        (["--python-env", "env.tar.gz"], "--python-env is for a Spark Connect server"),
        (["--remote", "http://127.0.0.1:1"], "starts with sc://"),
        (["--remote", "sc://127.0.0.1:1"], "no Spark Connect server answers at sc://127.0.0.1:1"),
    ],
)
def test_connect_arguments_that_cannot_work_fail_fast(tmp_path, args, message):
    (tmp_path / "env.tar.gz").write_bytes(b"")
    proc = cli(
        tmp_path, "audit", *args, "--log-dirs", str(SCENARIO / "brokers"), "--output", str(tmp_path / "o"), timeout=300
    )
    assert proc.returncode == 2, _out(proc)
    assert message in proc.stderr, _out(proc)


def test_master_with_spark_remote_set_fails_fast(tmp_path):
    env = dict(no_java_env(tmp_path), SPARK_REMOTE="sc://127.0.0.1:1")
    proc = cli(
        tmp_path,
        "audit",
        "--master",
        "local[1]",
        "--log-dirs",
        str(SCENARIO / "brokers"),
        "--output",
        str(tmp_path / "o"),
        env=env,
        timeout=300,
    )
    assert proc.returncode == 2 and "unset SPARK_REMOTE" in proc.stderr, _out(proc)


def test_live_audit_through_spark_connect_both_sources(connect_server, packed_env, spark, lab_live, tmp_path):
    """A real Kafka cluster: the live read through the server (kafka-python in its workers, or Spark's Kafka
    connector on its class path) gives the findings of the embedded local run."""
    url, log, _py = connect_server
    bootstrap, local = lab_live
    before = closed_sessions(log)
    procs = {}
    for source in ("kafka-python", "kafka-connector"):
        out = tmp_path / f"out-{source}"
        procs[source] = (
            cli(
                tmp_path,
                "audit",
                "--remote",
                url,
                "--python-env",
                str(packed_env),
                "--bootstrap-servers",
                bootstrap,
                "--source",
                source,
                "--output",
                str(out),
            ),
            out,
        )
    assert_released(log, before, 2)
    want = findings(spark, local)
    assert {("replayer", "events", 0, "OFFSET_OUT_OF_RANGE")} <= {f[:4] for f in want}
    for source, (proc, out) in procs.items():
        assert proc.returncode == 1, (source, _out(proc))  # OFFSET_OUT_OF_RANGE: error
        assert json.loads((out / "summary.json").read_text())["failed_stages"] == [], source
        assert findings(spark, out) == want, source
