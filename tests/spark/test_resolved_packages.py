"""``spark.jars.packages`` on a local master (audit.spark.ResolvedPackages): the first run resolves them and keeps the
jars' paths; a later run on a local master puts those jars on the driver's class path instead, so no jar is copied
to the executor's ``userFiles`` directory, and the classes still load (Hadoop's S3A filesystem and Spark's Kafka source, here)."""

import json
import os
import subprocess
import sys

import pytest

from audit.cli.session import hadoop_aws_package
from audit.sources.cluster import connector_package
from audit.spark import ClassDataArchive, ResolvedPackages, single_jvm_master


def test_kept_jars_are_used_only_while_each_of_them_exists(tmp_path):
    jars = [tmp_path / "a.jar", tmp_path / "b.jar"]
    for j in jars:
        j.write_bytes(b"PK")
    kept = ResolvedPackages(["g:b:1", "g:a:1"], directory=str(tmp_path / "kept"))
    assert kept.jars() is None  # nothing kept yet
    os.makedirs(tmp_path / "kept")
    with open(kept.path, "w") as f:
        f.write("".join(f"{j}\n" for j in jars))
    assert kept.jars() == [str(j) for j in jars]
    assert ResolvedPackages(["g:a:1", "g:b:1"], directory=str(tmp_path / "kept")).path == kept.path  # any order
    assert ResolvedPackages(["g:a:2", "g:b:1"], directory=str(tmp_path / "kept")).jars() is None  # other versions
    jars[1].unlink()  # ivy's cache was cleaned: resolve again
    assert kept.jars() is None


@pytest.mark.parametrize(
    ("master", "single"),
    [
        ("local", True),
        ("local[2]", True),
        ("local[*]", True),
        ("local[2,3]", True),
        ("local-cluster[2,1,1024]", False),
        ("spark://host:7077", False),
        ("yarn", False),
        ("k8s://https://host", False),
    ],
)
def test_only_a_master_whose_executor_is_the_driver_jvm_takes_the_jars_on_its_class_path(master, single):
    assert single_jvm_master(master) is single


def test_no_master_means_the_one_the_session_would_use(monkeypatch):
    monkeypatch.delenv("KOA_SPARK_MASTER", raising=False)
    assert single_jvm_master(None) is True
    monkeypatch.setenv("KOA_SPARK_MASTER", "spark://host:7077")
    assert single_jvm_master(None) is False


def test_the_class_data_archive_of_a_driver_with_kept_jars_is_another(tmp_path, monkeypatch):
    monkeypatch.setenv("KOA_CDS", "on")
    monkeypatch.setenv("KOA_CDS_DIR", str(tmp_path))
    with_packages = ClassDataArchive.for_this_install(["g:a:1"])
    on_class_path = ClassDataArchive.for_this_install(["g:a:1"], class_path=["/x/a.jar"])
    assert with_packages is not None and on_class_path is not None
    assert with_packages.path != on_class_path.path


_PROBE = """
import json, sys
from audit.spark import build_session
spark = build_session("local[1]", packages=sys.argv[1:])
conf = spark.sparkContext.getConf()
jvm = spark.sparkContext._jvm
fs = jvm.org.apache.hadoop.fs.FileSystem.getFileSystemClass("s3a", spark.sparkContext._jsc.hadoopConfiguration())
kafka = jvm.org.apache.spark.util.Utils.classForName("org.apache.spark.sql.kafka010.KafkaSourceProvider", True, False)
print(json.dumps({
    "jars": conf.get("spark.jars", ""),
    "class_path": conf.get("spark.driver.extraClassPath", ""),
    "s3a": fs.getName(),
    "kafka": kafka.getName(),
}))
spark.stop()
"""


@pytest.mark.slow
def test_a_second_local_run_puts_the_kept_jars_on_the_class_path_and_their_classes_still_load(tmp_path):
    env = dict(os.environ, XDG_CACHE_HOME=str(tmp_path / "cache"), KOA_CDS="off")
    env.pop("KOA_SPARK_MASTER", None)
    packages = [connector_package(), hadoop_aws_package()]  # --source kafka-connector with an s3a:// output

    def run() -> dict:
        out = subprocess.run(
            [sys.executable, "-c", _PROBE, *packages],
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
            check=True,
        )
        return json.loads(out.stdout.strip().splitlines()[-1])

    first = run()  # resolves through ivy and serves the jars through spark.jars
    assert "hadoop-aws" in first["jars"] and "spark-sql-kafka" in first["jars"] and not first["class_path"]
    kept = ResolvedPackages(packages, directory=str(tmp_path / "cache" / "kafka-offset-audit" / "packages"))
    jars = kept.jars()
    names = " ".join(os.path.basename(j) for j in jars or [])
    assert "hadoop-aws" in names and "spark-sql-kafka" in names and "kafka-clients" in names
    # the connector depends on hadoop-client-api and -runtime, which Spark has: its own stay first
    assert "hadoop-client-api" in first["jars"] and not any("hadoop-client" in j for j in jars)

    second = run()  # the kept jars on the driver's class path, nothing for the file server to copy
    assert not second["jars"]
    assert second["class_path"].split(os.pathsep) == jars
    for res in (first, second):
        assert res["s3a"] == "org.apache.hadoop.fs.s3a.S3AFileSystem"
        assert res["kafka"] == "org.apache.spark.sql.kafka010.KafkaSourceProvider"
