"""Broker log-dir copies and the audit's output in an S3-compatible object store: moto's server (a real S3 HTTP
API on loopback), read and written through Hadoop's S3A (``hadoop-aws`` from Maven Central, in the version of
pyspark's Hadoop client, added by the CLI) and, for ``summary.json`` and the reports, the same filesystem.

An object store has no atomic rename, so the output is committed by a marker (``audit.io.outputs``): each
run writes ``OUTPUT/runs/<run>/`` and then ``OUTPUT/summary.json`` names it.  A run killed in the middle of its
writes (SIGKILL once its tables start to appear, or right after its marker) must leave the previous run
committed and readable, and nothing that looks complete; the next run removes the leftovers.  Findings equal the
local run's.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from ..cluster_fixtures import free_port, wait_for
from ..paths import SCENARIO

BUCKET = "koa"


@pytest.fixture(scope="session")
def s3(tmp_path_factory):
    """A moto S3 server with bucket ``koa`` holding a copy of the shared scenario's log dirs under ``copies/``:
    ``{"endpoint", "env", "fs"}`` (``env``: the AWS variables a client needs; ``fs``: a pyarrow S3 filesystem)."""
    from pyarrow import fs as pafs

    base = tmp_path_factory.mktemp("moto")
    port = free_port()
    log = base / "moto.log"
    proc = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
    )
    endpoint = f"http://127.0.0.1:{port}"
    try:

        def up():
            import urllib.request

            try:
                urllib.request.urlopen(endpoint, timeout=2).read()
                return True
            except Exception:  # noqa: BLE001 - not yet listening
                return False

        wait_for("moto's S3 server", up, timeout=60, proc=proc, log=log)
        env = {
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_REGION": "us-east-1",
            "AWS_ENDPOINT_URL": endpoint,
        }
        s3fs = pafs.S3FileSystem(
            endpoint_override=f"127.0.0.1:{port}",
            scheme="http",
            region="us-east-1",
            access_key="testing",
            secret_key="testing",
            allow_bucket_creation=True,
        )
        s3fs.create_dir(BUCKET)
        pafs.copy_files(
            str(SCENARIO / "brokers"),
            f"{BUCKET}/copies/brokers",
            source_filesystem=pafs.LocalFileSystem(),
            destination_filesystem=s3fs,
        )
        yield {"endpoint": endpoint, "env": env, "fs": s3fs}
    finally:
        proc.terminate()
        proc.wait(30)


def s3a_conf(endpoint: str) -> list[str]:
    """The README's S3A settings for an S3-compatible endpoint."""
    return [
        "--conf",
        f"spark.hadoop.fs.s3a.endpoint={endpoint}",
        "--conf",
        "spark.hadoop.fs.s3a.path.style.access=true",
        "--conf",
        "spark.hadoop.fs.s3a.endpoint.region=us-east-1",
        # moto answers an "Expect: 100-continue" upload with a bare 100 the AWS SDK takes for an error
        "--conf",
        "spark.hadoop.fs.s3a.connection.expect.continue=false",
    ]


def audit_cmd(s3, output: str, *more: str) -> list[str]:
    return [
        os.path.join(os.path.dirname(sys.executable), "kafka-offset-audit"),
        "audit",
        "--log-dirs",
        f"s3a://{BUCKET}/copies/brokers",
        "--output",
        output,
        *s3a_conf(s3["endpoint"]),
        *more,
    ]


def run_env(s3, **more) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(s3["env"], **more)
    return env


def _out(proc) -> str:
    return f"exit {proc.returncode}\nstdout:\n{(proc.stdout or '')[-3000:]}\nstderr:\n{(proc.stderr or '')[-3000:]}"


def read_json(s3, key: str):
    with s3["fs"].open_input_stream(key) as f:
        return json.loads(f.read())


def findings(s3, run_dir: str) -> list:
    import pyarrow.dataset as ds

    key = run_dir.partition("://")[2] + "/findings"
    t = ds.dataset(key, filesystem=s3["fs"], format="parquet").to_table()
    return sorted((r["group_id"], r["topic"], r["partition"], r["finding"], r["severity"]) for r in t.to_pylist())


def local_findings(out: Path) -> list:
    import pyarrow.parquet as pq

    return sorted(
        (r["group_id"], r["topic"], r["partition"], r["finding"], r["severity"])
        for r in pq.read_table(str(out / "findings")).to_pylist()
    )


def runs(s3, prefix: str) -> list[str]:
    from pyarrow import fs as pafs

    try:
        return sorted(i.base_name for i in s3["fs"].get_file_info(pafs.FileSelector(f"{prefix}/runs")))
    except FileNotFoundError:
        return []


def test_audit_into_s3_equals_the_local_run_and_killed_runs_leave_one_committed_run(s3, scenario_latest):
    """The first run: ``s3a://`` log dirs, reports on, ``--history`` in the bucket too: the marker names the run,
    whose tables, summary and reports are all there; the findings equal the local run's; the history holds the run.
    Then SIGKILL while the tables are being written, then right after the marker: the marker always names a
    complete run (the previous one until the new marker is written); the next run removes the killed run's
    directory and the runs before the previous one."""
    prefix = f"{BUCKET}/out-kill"
    output = f"s3a://{prefix}"
    first = subprocess.run(
        audit_cmd(s3, output, "--history", f"s3a://{BUCKET}/history", "--quiet"),
        env=run_env(s3),
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert first.returncode == 1, _out(first)  # the scenario's critical findings
    m0 = read_json(s3, f"{prefix}/summary.json")
    assert m0["failed_stages"] == [] and m0["run_dir"].startswith(f"{output}/runs/")
    assert m0["previous_run_dir"] is None
    key = m0["run_dir"].partition("://")[2]
    for name in ("summary.json", "report.html", "metrics.prom", "expectations/validation_result.json"):
        assert s3["fs"].get_file_info(f"{key}/{name}").size > 0, name
    want = findings(s3, m0["run_dir"])
    assert want == local_findings(scenario_latest[1])
    assert runs(s3, prefix) == [m0["run_dir"].rsplit("/", 1)[1]]
    hist = m0["history"]
    assert hist["previous_run_id"] is None and hist["new"] == m0["findings"]["total"]
    from pyarrow import fs as pafs

    appended = s3["fs"].get_file_info(pafs.FileSelector(f"{BUCKET}/history/runs", recursive=True))
    assert any(f.path.endswith(".parquet") for f in appended)

    # killed in the middle of writing its tables
    # its own process group: SIGKILL takes the Spark driver's JVM with it, as a killed container would
    proc = subprocess.Popen(
        audit_cmd(s3, output, "--quiet", "--skip-reports"),
        env=run_env(s3),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )

    def writing():
        for name in runs(s3, prefix):
            if f"{output}/runs/{name}" != m0["run_dir"]:
                try:
                    if s3["fs"].get_file_info(pafs.FileSelector(f"{prefix}/runs/{name}", recursive=True)):
                        return True
                except FileNotFoundError:
                    pass
        return False

    wait_for("the second run's first objects", writing, timeout=600, proc=proc)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(60)
    assert read_json(s3, f"{prefix}/summary.json") == m0 and findings(s3, m0["run_dir"]) == want
    # what the killed run wrote is only under its own runs/<run>/ (if it had written anything yet)
    half = [n for n in runs(s3, prefix) if f"{output}/runs/{n}" != m0["run_dir"]]
    assert len(half) <= 1

    # killed right after its marker: that run is committed, whole, the first one its previous
    killed = subprocess.run(
        audit_cmd(s3, output, "--quiet", "--skip-reports"),
        env=run_env(s3, KOA_KILL_AT="after-marker"),
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert killed.returncode == -signal.SIGKILL, _out(killed)
    m3 = read_json(s3, f"{prefix}/summary.json")
    assert m3["run_dir"] != m0["run_dir"] and m3["previous_run_dir"] == m0["run_dir"]
    assert findings(s3, m3["run_dir"]) == want and m3["failed_stages"] == []
    # each run begins by removing the directories of killed runs (the half-written one, if its driver left it):
    # the first run and this one remain
    assert sorted(m3["output_leftovers"]["removed"]) == sorted(f"runs/{n}" for n in half)
    assert sorted(f"{output}/runs/{n}" for n in runs(s3, prefix)) == sorted([m0["run_dir"], m3["run_dir"]])

    # the next run: committed, and the first run (now before the previous one) removed
    last = subprocess.run(
        audit_cmd(s3, output, "--quiet", "--skip-reports"), env=run_env(s3), capture_output=True, text=True, timeout=900
    )
    assert last.returncode == 1, _out(last)
    m4 = read_json(s3, f"{prefix}/summary.json")
    assert m4["previous_run_dir"] == m3["run_dir"] and findings(s3, m4["run_dir"]) == want
    assert sorted(f"{output}/runs/{n}" for n in runs(s3, prefix)) == sorted([m3["run_dir"], m4["run_dir"]])
    assert m4["output_leftovers"]["removed"] == []

    # the analysts' views read the committed run the marker names, not DIR/findings (there is none)
    views = subprocess.run(
        [
            audit_cmd(s3, output)[0],
            "views",
            "--output",
            output,
            "--query",
            "SELECT count(*) AS n, min(f) AS f FROM (SELECT input_file_name() AS f FROM koa_findings)",
            "--format",
            "json",
            *s3a_conf(s3["endpoint"]),
        ],
        env=run_env(s3),
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert views.returncode == 0, _out(views)
    got = json.loads(views.stdout.strip().splitlines()[-1])
    assert got["n"] == len(want) and got["f"].startswith(m4["run_dir"] + "/findings/"), got


def test_the_connect_clients_object_store_access(s3, tmp_path, monkeypatch):
    """A Spark Connect client has no JVM: its ``s3a://`` reads, writes, listings, renames and uploads go through
    ``pyarrow.fs`` (``audit.io.fs._ArrowStore``), configured from the AWS environment (``AWS_ENDPOINT_URL``);
    a scheme it cannot reach is refused with a message naming what works."""
    from audit.io import fs

    for k, v in s3["env"].items():
        monkeypatch.setenv(k, v)
    monkeypatch.setattr(fs, "_S3", None)
    root = f"s3a://{BUCKET}/client"
    listed = fs._ArrowStore(f"s3a://{BUCKET}/copies/brokers").walk()
    assert len(listed) == sum(1 for p in (SCENARIO / "brokers").rglob("*") if p.is_file())
    assert all(f.uri.startswith(f"s3a://{BUCKET}/copies/brokers/") and f.size >= 0 for f in listed)
    some = next(f for f in listed if f.uri.endswith("meta.properties"))
    rel = some.uri[len(f"s3a://{BUCKET}/copies/brokers/") :]
    assert fs._ArrowStore(some.uri).read(1 << 20) == (SCENARIO / "brokers" / rel).read_bytes()
    st = fs._ArrowStore(f"{root}/a/summary.json")
    st.write(b'{"tool": "kafka-offset-audit"}')
    assert st.exists() and not st.is_dir() and fs._ArrowStore(f"{root}/a").is_dir()
    assert fs._ArrowStore(f"{root}/a").names() == ["summary.json"]
    (tmp_path / "rep" / "sub").mkdir(parents=True)
    (tmp_path / "rep" / "sub" / "x.txt").write_text("x")
    fs._ArrowStore(f"{root}/a/rep").upload(str(tmp_path / "rep"))
    assert fs._ArrowStore(f"{root}/a/rep/sub/x.txt").read(10) == b"x"
    assert fs._ArrowStore(f"{root}/a").rename(f"{root}/b")
    assert not fs._ArrowStore(f"{root}/a").exists() and fs._ArrowStore(f"{root}/b/rep/sub/x.txt").exists()
    assert fs._ArrowStore(f"{root}/b/summary.json/x").nearest_existing_ancestor_is_file() == f"{root}/b/summary.json"
    fs._ArrowStore(f"{root}/b").delete()
    assert not fs._ArrowStore(f"{root}/b").exists()
    with pytest.raises(fs.InputError, match="s3a://"):
        fs._ArrowStore("hdfs://namenode:8020/x")
