"""The audit on a real Spark standalone cluster whose executors have nothing installed.

A master and two workers start from pyspark's own jars (``spark-class ...deploy.master.Master`` and
``...deploy.worker.Worker``) on loopback; their Python is an empty virtual environment (no project, no numpy, no
pyarrow). The README's "Run on a Spark cluster" blocks run as written (the master's address and the log dirs or
the bootstrap servers put in place of ``spark://spark-master:7077`` and ``/copies/...``): ``kafka-offset-audit
package`` packs the executors' environment, ``spark-submit --archives ...#env`` runs the installed application in
client mode. A live audit of a real Kafka cluster this way (with the README's step that unpacks the archive as
``./env`` on the driver, for the Python data source's planner) equals the local one, and the workers' executor
logs show the tasks run with the archive's Python. Without the archive the same submit fails (exit 3): the
executors cannot import pyarrow. The offline audit on this cluster with the packed environment, compared with the
local run, is the Airflow DAG's standalone test (``tests/airflow/test_airflow_dag.py``).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

from ..jvm import submit_env
from ..paths import SCENARIO
from ..test_readme_commands import LOG_DIRS, readme_blocks

MASTER_PLACEHOLDER = "spark://spark-master:7077"


def _submit(standalone, cwd: Path, out: Path, archive: bool):
    url, _works, empty_py, _base = standalone
    cmd = readme_blocks()["cluster-submit"]
    assert MASTER_PLACEHOLDER in cmd and LOG_DIRS in cmd
    cmd = (
        cmd.replace(MASTER_PLACEHOLDER, f"{url} --conf spark.ui.enabled=false --executor-memory 1g")
        .replace(LOG_DIRS, str(SCENARIO / "brokers"))
        .replace("--output audit-out", f"--output {out}")
    )
    if not archive:  # the executors' own Python: the empty venv
        cmd = cmd.replace(" --archives kafka-offset-audit-env.tar.gz#env", "").replace(
            "PYSPARK_PYTHON=./env/bin/python", f"PYSPARK_PYTHON={empty_py}"
        )
    env = {k: v for k, v in os.environ.items() if k not in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "SPARK_HOME")}
    env = submit_env({**env, "SPARK_LOCAL_IP": "127.0.0.1"})
    return subprocess.run(
        ["bash", "-c", "set -euo pipefail\n" + cmd], cwd=cwd, env=env, capture_output=True, text=True, timeout=1200
    )


def _findings(spark, out: Path) -> list:
    return sorted(
        tuple(r)
        for r in spark.read.parquet(str(out / "findings"))
        .select("group_id", "topic", "partition", "finding", "severity", "committed_offset")
        .collect()
    )


def test_without_the_packed_environment_the_executors_cannot_run(standalone, tmp_path):
    out = tmp_path / "out"
    proc = _submit(standalone, tmp_path, out, archive=False)
    assert proc.returncode == 3, proc.stderr[-5000:]
    # spark-submit's PythonRunner merges the application's stderr into its stdout
    last = [
        line
        for line in (proc.stdout + proc.stderr).splitlines()
        if line.startswith("kafka-offset-audit: internal error")
    ]
    # one line naming the stage and the executors' missing module (their Python is the empty venv)
    assert last and re.search(r"stage 'decode'.*No module named '(pyarrow|numpy)'", last[-1]), last
    assert not (out / "summary.json").exists()


def test_live_audit_on_a_standalone_cluster_with_a_packed_environment(
    standalone, packed_env, spark, lab_live, tmp_path
):
    """The same submit with --bootstrap-servers: the live read (a Python data source; kafka-python in the
    executors) against a real Kafka cluster, the same findings as the embedded local run."""
    bootstrap, local = lab_live
    shutil.copy(packed_env, tmp_path / packed_env.name)
    out = tmp_path / "out"
    url, *_ = standalone
    cmd = (
        readme_blocks()["cluster-live-env"]
        + "\n"
        + readme_blocks()["cluster-submit"]
        .replace(MASTER_PLACEHOLDER, f"{url} --conf spark.ui.enabled=false --executor-memory 1g")
        .replace(f"--log-dirs {LOG_DIRS}", f"--bootstrap-servers {bootstrap}")
        .replace("--output audit-out", f"--output {out}")
    )
    env = {k: v for k, v in os.environ.items() if k not in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "SPARK_HOME")}
    env.update(SPARK_LOCAL_IP="127.0.0.1")
    proc = subprocess.run(
        ["bash", "-c", "set -euo pipefail\n" + cmd], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=1200
    )
    assert proc.returncode == 1, (proc.stdout[-3000:], proc.stderr[-3000:])  # OFFSET_OUT_OF_RANGE: error
    assert json.loads((out / "summary.json").read_text())["failed_stages"] == []
    got, want = _findings(spark, out), _findings(spark, local)
    assert got == want and {("replayer", "events", 0, "OFFSET_OUT_OF_RANGE")} <= {f[:4] for f in got}
    assert (out / "report.html").is_file()
    # the tasks ran in the workers' executors, with the archive's Python
    _url, works, _py, _base = standalone
    logs = [p for w in works for p in w.glob("app-*/*/stderr")]
    ran = [p for p in logs if "Finished task" in p.read_text(errors="replace")]
    assert ran, [str(p) for p in logs]
    assert any((p.parent / "env" / "bin" / "python").exists() for p in ran)


def test_the_packed_environment_holds_what_the_executors_import_and_not_the_rest(packed_env):
    """The README's archive (the one the live audits above and the Connect tests run on): pyarrow's, numpy's and
    the codecs' native libraries are in it; pip, the test suites and Arrow Flight are not."""
    import tarfile

    with tarfile.open(packed_env) as tar:
        names = [n.split("site-packages/", 1)[1] for n in tar.getnames() if "site-packages/" in n]
    assert any(n.startswith("pyarrow/libarrow.so.") for n in names)
    assert any(n.startswith("pyarrow/libparquet.so.") for n in names)
    for top in ("numpy/", "pandas/", "crc32c/", "cramjam/", "lz4/", "zstandard/", "kafka/", "pydantic/"):
        assert any(n.startswith(top) for n in names), top
    for gone in ("pip/", "setuptools/", "pandas/tests/", "pyarrow/tests/", "pyarrow/include/", "great_expectations/"):
        assert not any(n.startswith(gone) for n in names), gone
    assert not any("libarrow_flight" in n or "libarrow_s3" in n for n in names)
