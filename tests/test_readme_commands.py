"""The README's runnable command blocks, run as a user runs them: a copy of this checkout, a fresh virtual
environment, ``pip install .`` (a regular install, not ``-e``), the CLI's defaults (reports on).

Each block marked ``<!-- runnable: NAME -->`` in README.md or a page of ``docs/`` is taken from there, so the
documentation and what is tested cannot drift apart; only the placeholders a reader replaces are replaced here: the log dirs
``/copies/...`` by the shared scenario's brokers, the bootstrap servers ``kafka-1:9092,...`` by a real lab
cluster's, restarted (a rolling restart, no write after it: each partition's current leader epoch holds no
record, the shape a live audit with reports on once crashed on) on each Kafka version of the lab.  The user's
environment (``_user_env``) gets pip's version check and the class-data archive turned off, and
``SPARK_SUBMIT_OPTS`` (:func:`tests.jvm.submit_env`: JIT and collector options only), so that the ``spark-submit``
block's driver starts as the CLI's own does.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from .jvm import submit_env
from .paths import REPO, SCENARIO

RUNNABLE = re.compile(r"<!-- runnable: (?P<name>[\w-]+) -->\s*```bash\n(?P<body>.*?)```", re.S)
LOG_DIRS = "/copies/broker-1 /copies/broker-2 /copies/controller"
BOOTSTRAP = "kafka-1:9092,kafka-2:9092"
INSTALL_TIMEOUT = 1500


def readme_blocks() -> dict[str, str]:
    """The runnable blocks of README.md and of the documentation pages (``docs/*.md``) by name.  A name marked in
    more than one place (the README repeats a page's command) must have the same command everywhere."""
    blocks: dict[str, str] = {}
    for page in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        for m in RUNNABLE.finditer(page.read_text()):
            body = m["body"].replace("\\\n", " ").strip()
            assert blocks.setdefault(m["name"], body) == body, f"{page.name}: block {m['name']} differs from its twin"
    return blocks


def _user_env() -> dict:
    """This machine's environment without this test run's virtual environment or Python path."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "SPARK_HOME")
    }
    venv = os.environ.get("VIRTUAL_ENV")
    parts = [p for p in env.get("PATH", "").split(os.pathsep) if p and not (venv and p.startswith(venv))]
    env["PATH"] = os.pathsep.join(parts)
    env.update(PIP_DISABLE_PIP_VERSION_CHECK="1", KOA_CDS="off")
    return submit_env(env)  # the spark-submit block's driver starts as the CLI's own driver does


def _bash(command: str, cwd: Path, timeout: float, activate: bool = True) -> subprocess.CompletedProcess:
    script = "set -euo pipefail\n" + (". .venv/bin/activate\n" if activate else "") + command + "\n"
    return subprocess.run(
        ["bash", "-c", script], cwd=cwd, env=_user_env(), capture_output=True, text=True, timeout=timeout
    )


def _out(proc) -> str:
    return f"exit {proc.returncode}\nstdout:\n{proc.stdout[-4000:]}\nstderr:\n{proc.stderr[-4000:]}"


def test_the_readme_marks_the_commands_ci_runs():
    blocks = readme_blocks()
    assert set(blocks) == {
        "demo",
        "offline-audit",
        "spark-submit",
        "live-audit",
        "cluster-package",
        "cluster-submit",
        "cluster-live-env",
        "connect-server",
        "connect-audit",
    }, blocks
    assert "pip install ." in blocks["demo"] and "-e" not in blocks["demo"].split()
    assert LOG_DIRS in blocks["offline-audit"] and LOG_DIRS in blocks["spark-submit"]
    assert BOOTSTRAP in blocks["live-audit"]
    assert "--skip-reports" not in " ".join(blocks.values())  # the defaults users keep


@pytest.fixture(scope="module")
def user_checkout(tmp_path_factory):
    """A copy of this checkout (the files git tracks or would track) where the README's first command ran:
    a fresh .venv with the project installed by ``pip install .``, and the demo's output."""
    dest = tmp_path_factory.mktemp("user") / "kafka-offset-audit"
    files = (
        subprocess.run(
            ["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=REPO, capture_output=True, check=True
        )
        .stdout.decode()
        .split("\0")
    )
    for f in filter(None, files):
        src = REPO / f
        if src.is_file():
            (dest / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / f)
    t = time.monotonic()
    proc = _bash(readme_blocks()["demo"], dest, INSTALL_TIMEOUT, activate=False)
    assert proc.returncode == 0, _out(proc)
    print(f"README demo block (fresh venv, pip install ., demo): {time.monotonic() - t:.0f} s")
    return dest, proc


def test_demo_from_a_regular_install(user_checkout):
    dest, proc = user_checkout
    where = _bash(
        "cd / && python -c 'import audit, json; print(json.dumps(audit.__file__))' && "
        "pip show --files kafka-offset-audit | grep -c 'audit/sql/finding_log_truncation.sql'",
        dest,
        120,
    )
    assert where.returncode == 0, _out(where)
    audit_file = json.loads(where.stdout.splitlines()[0])
    assert "/.venv/lib/" in audit_file and "site-packages" in audit_file, audit_file  # not the checkout (-e)
    assert not list((dest / ".venv").glob("lib/python*/site-packages/__editable__*"))
    summary = json.loads((dest / "demo-output" / "summary.json").read_text())
    assert summary["exit_status"] == 0 and summary["findings"]["by_name"]["LOG_TRUNCATION"] == 3
    assert (dest / "demo-output" / "report.html").is_file() and summary["reports"]["html_report"] == "report.html"


def _findings(out: Path) -> list:
    import pyarrow.parquet as pq

    return sorted(
        (r["group_id"], r["topic"], r["partition"], r["finding"], r["severity"])
        for r in pq.read_table(str(out / "findings")).to_pylist()
    )


def _check_audit(proc, out: Path) -> dict:
    """A complete audit with reports: exit 0 or 1 (findings), never 3, every report written."""
    assert proc.returncode in (0, 1), _out(proc)
    assert "internal error" not in proc.stderr and "Traceback" not in proc.stderr, _out(proc)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["exit_status"] == proc.returncode and summary["failed_stages"] == []
    assert summary["reports"]["html_report"] == "report.html" and (out / "report.html").is_file()
    assert (out / "expectations" / "validation_result.json").is_file() and (out / "metrics.prom").is_file()
    return summary


def test_offline_audit_and_spark_submit_from_a_regular_install(user_checkout):
    dest, _ = user_checkout
    blocks = readme_blocks()
    runs = {}
    for name, cmd in (
        ("offline-audit", blocks["offline-audit"]),
        ("spark-submit", blocks["spark-submit"]),
        # a checkout's own job file, with the project installed regularly (it died in parse_ahead)
        ("checkout job", blocks["spark-submit"].replace('"$(kafka-offset-audit spark-app)"', "jobs/audit_offsets.py")),
    ):
        out = dest / f"out-{name.replace(' ', '-')}"
        cmd = cmd.replace(LOG_DIRS, str(SCENARIO / "brokers")).replace("--output audit-out", f"--output {out}")
        assert str(SCENARIO) in cmd and str(out) in cmd, cmd
        scratch = dest.parent / f"tmp-{name.replace(' ', '-')}"
        scratch.mkdir(exist_ok=True)
        proc = _bash(f"export TMPDIR={scratch}\n" + cmd, dest, 900)
        summary = _check_audit(proc, out)
        assert proc.returncode == 1  # the scenario has critical findings; --fail-on defaults to error
        runs[name] = (_findings(out), summary["findings"]["by_severity"])
        # the zip of the audit package a submitted job ships to its executors is removed when the job ends
        assert not list(scratch.glob("koa-pyfiles-*")), name
    assert runs["offline-audit"] == runs["spark-submit"] == runs["checkout job"]
    assert sum(runs["offline-audit"][1].values()) == 15


def test_spark_connect_blocks_from_a_regular_install(user_checkout, connect_server, scenario_latest):
    """The README's Connect client block in the user's checkout (its ``pip install '.[connect]'`` too) against the
    server the ``connect-server`` block started, from a client where ``java`` fails: no JVM starts here."""
    from .cluster_fixtures import CONNECT_PLACEHOLDER

    dest, _ = user_checkout
    url, server_log, _py = connect_server
    out = dest / "out-connect"
    fake = dest.parent / "no-java"
    fake.mkdir(exist_ok=True)
    (fake / "java").write_text("#!/bin/sh\necho 'no JVM on this client' >&2\nexit 97\n")
    (fake / "java").chmod(0o755)
    cmd = readme_blocks()["connect-audit"]
    assert CONNECT_PLACEHOLDER in cmd and LOG_DIRS in cmd, cmd
    cmd = (
        cmd.replace(CONNECT_PLACEHOLDER, url)
        .replace(LOG_DIRS, str(SCENARIO / "brokers"))
        .replace("--output audit-out", f"--output {out}")
    )
    proc = _bash(f"export JAVA_HOME={dest.parent / 'no-jdk'} PATH={fake}:$PATH\n" + cmd, dest, INSTALL_TIMEOUT)
    summary = _check_audit(proc, out)
    assert proc.returncode == 1 and sum(summary["findings"]["by_severity"].values()) == 15, _out(proc)
    assert _findings(out) == _findings(scenario_latest[1])
    assert not [p for p in dest.iterdir() if "koa-connect-probe" in p.name]  # the shared-filesystem probe is removed
    # no JVM here (java fails), so every Spark job ran in the server: its log has the session's jobs
    assert "is finished" in server_log.read_text()


def _wait_replicated(lab, topics, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while True:
        state, err = lab.try_call("describe", topics=topics)
        if err is None and all(s["leader"] >= 0 and set(s["isr"]) == set(s["replicas"]) for s in state):
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"still under-replicated after {timeout} s: {state or err}")
        time.sleep(0.5)


def _lab_versions():
    from tests.lab import kafka_dist

    return kafka_dist.feature_versions(1)


@pytest.mark.parametrize("version", _lab_versions(), ids=lambda v: f"kafka-{v}")
def test_live_audit_with_defaults_on_a_restarted_cluster(user_checkout, version, tmp_path):
    """The README's live command against a real cluster after a rolling restart with no write since."""
    import pyarrow.parquet as pq

    from tests.lab.client import LabClient, out_of_range_commits
    from tests.lab.cluster import KafkaCluster

    dest, _ = user_checkout
    topic = "events"
    cluster = KafkaCluster(version, tmp_path / "cluster", brokers=3).start()
    try:
        with LabClient(version, cluster.bootstrap, log=tmp_path / "labclient.log") as lab:
            out_of_range_commits(lab, topic)
            topics = [topic, "__consumer_offsets"]
            _wait_replicated(lab, topics)
            for node in cluster.broker_nodes():  # a rolling restart; nothing is written after it
                cluster.restart(node.node_id)
                _wait_replicated(lab, topics)
        out = dest / f"out-live-{version}"
        cmd = (
            readme_blocks()["live-audit"]
            .replace(BOOTSTRAP, cluster.bootstrap)
            .replace("--output audit-out", f"--output {out}")
        )
        proc = _bash(cmd, dest, 900)
    finally:
        cluster.stop()
    summary = _check_audit(proc, out)
    assert proc.returncode == 1, _out(proc)  # OFFSET_OUT_OF_RANGE (error) for replayer and archiver
    found = {(g, t, p, f) for g, t, p, f, _s in _findings(out)}
    assert {("replayer", topic, 0, "OFFSET_OUT_OF_RANGE"), ("archiver", topic, 1, "OFFSET_OUT_OF_RANGE")} <= found
    epochs = pq.read_table(str(out / "epochs")).to_pylist()
    assert any(e["topic"] == topic and e["start_offset"] is None and e["leader_epoch"] > 0 for e in epochs), epochs
    html = (out / "report.html").read_text()
    assert f'data-topic="{topic}" data-partition="0"' in html  # its partition plotted, with the epoch's level
    assert summary["inputs"].get("bootstrap_servers") == cluster.bootstrap or cluster.bootstrap in json.dumps(
        summary["inputs"]
    )
