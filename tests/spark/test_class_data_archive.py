"""The driver JVM's class-data archive (audit.spark.ClassDataArchive): written by a first run's JVM, checked by a
JVM before use, never used when broken, and the audit's results are the same with it."""

import json
import os
import shutil
import subprocess
import sys
import time

import pytest

from audit.spark import ClassDataArchive

from ..paths import SCENARIO

JAVA = shutil.which("java")
pytestmark = pytest.mark.skipif(JAVA is None, reason="needs a JDK (java on the PATH)")


def _dump(tmp_path, name: str) -> tuple[str, str]:
    """A real (tiny) dynamic archive of ``java -version`` with a one-jar class path: (file, class path)."""
    import pyspark

    cp = sorted((os.path.join(os.path.dirname(pyspark.__file__), "jars"),))[0]
    jar = sorted(p for p in os.listdir(cp) if p.endswith(".jar"))[0]
    cp = os.path.join(cp, jar)
    out = str(tmp_path / name)
    subprocess.run(
        [JAVA, f"-XX:ArchiveClassesAtExit={out}", "-XX:+VerifySharedSpaces", "-Xlog:cds*=off", "-cp", cp, "-version"],
        check=True,
        capture_output=True,
    )
    return out, cp


def _archive(tmp_path, monkeypatch) -> ClassDataArchive:
    monkeypatch.setenv("KOA_CDS", "on")
    monkeypatch.setenv("KOA_CDS_DIR", str(tmp_path / "cds"))
    a = ClassDataArchive.for_this_install()
    assert a is not None and os.path.isdir(tmp_path / "cds")
    return a


def _pending(a: ClassDataArchive, src: str, cp: str, pid: int) -> str:
    dump = f"{a.path[:-4]}.dumping-{pid}.jsa"
    shutil.copy(src, dump)
    with open(f"{dump}.json", "w") as f:
        json.dump({"pid": pid, "class_path": cp}, f)
    return dump


def _dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def test_off_and_key(tmp_path, monkeypatch):
    monkeypatch.setenv("KOA_CDS", "off")
    assert ClassDataArchive.for_this_install() is None
    a = _archive(tmp_path, monkeypatch)
    b = ClassDataArchive.for_this_install(["org.apache.spark:spark-sql-kafka-0-10_2.13:4.0.0"])
    assert a.path != b.path  # --packages put other classes in the JVM: an archive of its own
    assert a.path == ClassDataArchive.for_this_install().path


def test_first_run_dumps_then_a_checked_dump_is_used(tmp_path, monkeypatch):
    a = _archive(tmp_path, monkeypatch)
    opts = a.java_options()
    assert f"-XX:ArchiveClassesAtExit={a.dump_path}" in opts and "SharedArchiveFile" not in opts
    good, cp = _dump(tmp_path, "good.jsa")
    dump = _pending(a, good, cp, _dead_pid())
    b = ClassDataArchive.for_this_install()
    assert b.java_options() == f"-XX:SharedArchiveFile={b.path} -Xlog:cds*=off"
    assert b.dump_path is None and os.path.getsize(b.path) == os.path.getsize(good)
    assert not os.path.exists(dump) and not os.path.exists(dump + ".json")


def test_a_truncated_dump_is_removed_not_used(tmp_path, monkeypatch):
    """A JVM killed while writing leaves a short file; a JVM mapping it would crash, so the check must catch it."""
    a = _archive(tmp_path, monkeypatch)
    good, cp = _dump(tmp_path, "good.jsa")
    short = tmp_path / "short.jsa"
    short.write_bytes(open(good, "rb").read()[: os.path.getsize(good) // 2])
    dump = _pending(a, str(short), cp, _dead_pid())
    opts = a.java_options()
    assert "ArchiveClassesAtExit" in opts and not a.ready()  # dumps anew
    assert not os.path.exists(dump) and not os.path.exists(dump + ".json")


def test_a_dump_still_being_written_is_left_alone(tmp_path, monkeypatch):
    a = _archive(tmp_path, monkeypatch)
    good, cp = _dump(tmp_path, "good.jsa")
    dump = _pending(a, good, cp, os.getpid())  # this process stands for the JVM still writing
    assert a.java_options() == "" and a.dump_path is None  # no second dump at the same time, no archive yet
    assert os.path.exists(dump) and not a.ready()


def test_cli_writes_the_archive_and_uses_it_with_the_same_findings(tmp_path, scenario_latest):
    """Two CLI runs in fresh processes: the first's JVM writes the archive after the run, the second checks it
    and starts with it (-Xshare:on: a JVM that cannot map it fails to start); findings as without it."""
    env = dict(
        os.environ,
        KOA_CDS="on",
        KOA_CDS_DIR=str(tmp_path / "cds"),
        PYSPARK_PYTHON=sys.executable,
        KOA_DRIVER_JAVA_OPTIONS="-Xshare:on -XX:TieredStopAtLevel=1",
    )
    brokers = [str(p) for p in sorted((SCENARIO / "brokers").iterdir())]

    def audit(out):
        return subprocess.run(
            [
                sys.executable,
                "-m",
                "audit.cli",
                "audit",
                "--log-dirs",
                *brokers,
                "--output",
                str(tmp_path / out),
                "--skip-reports",
                "--fail-on",
                "never",
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )

    first = audit("o1")
    assert first.returncode == 0, first.stderr[-3000:]
    assert "writes a class-data archive" in first.stdout
    metas = list((tmp_path / "cds").glob("*.dumping-*.jsa.json"))
    assert len(metas) == 1
    pid = json.loads(metas[0].read_text())["pid"]
    deadline = time.time() + 300
    while time.time() < deadline:  # the JVM writes the archive after the audit's process ended
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.5)
    second = audit("o2")
    assert second.returncode == 0, second.stderr[-3000:]
    assert "class-data archive" not in second.stdout
    archives = [p.name for p in (tmp_path / "cds").iterdir()]
    assert len(archives) == 1 and archives[0].startswith("spark-driver-") and ".dumping-" not in archives[0]
    expected = json.loads((scenario_latest[1] / "summary.json").read_text())["findings"]
    for out in ("o1", "o2"):
        assert json.loads((tmp_path / out / "summary.json").read_text())["findings"] == expected
