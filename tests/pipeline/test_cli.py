"""The console script end to end: demo writes the whole output contract, exit statuses."""

import json

import pytest

from audit.cli import main


@pytest.mark.slow
def test_demo_writes_output_contract_and_reports(tmp_path, capsys, spark):
    out = tmp_path / "demo"
    assert main(["demo", "--output", str(out)]) == 0  # demo: --fail-on never
    printed = capsys.readouterr().out
    assert "LOG_TRUNCATION" in printed and "dev-settlement" in printed
    for name in ("findings", "committed_offsets", "epochs", "bounds"):
        assert list((out / name).glob("*.parquet")), name
    summary = json.loads((out / "summary.json").read_text())
    assert summary["reports"]["expectations"]["success"] is True
    assert (out / "data_docs/index.html").exists() and (out / "report.html").exists()
    assert (out / "expectations/validation_result.json").exists()
    truncations = spark.read.parquet(str(out / "findings")).where(
        "finding = 'LOG_TRUNCATION' AND topic = 'dev.payments'"
    )
    assert sorted(r.divergence_offset for r in truncations.collect()) == [50, 60]
    # rerun replaces the result atomically, leaving no staging dirs behind
    assert main(["demo", "--output", str(out), "--skip-reports", "--mode", "history"]) == 0
    assert (out / "commits").exists() and not (out / "report.html").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["demo"]


@pytest.mark.slow
def test_fail_on_sets_exit_status(tmp_path):
    from audit.cli import demo_log_dirs

    args = ["audit", "--log-dirs", demo_log_dirs(), "--output", str(tmp_path / "o"), "--quiet"]
    assert main(args + ["--fail-on", "critical"]) == 1
    summary = json.loads((tmp_path / "o/summary.json").read_text())
    assert summary["reports"]["expectations"]["success"] is False
    assert "findings.no_failing_severity" in summary["reports"]["expectations"]["failed"]
    assert main(args + ["--fail-on", "never", "--skip-reports"]) == 0


@pytest.mark.slow
def test_max_rows_bounds_the_console_and_is_checked(tmp_path, capsys):
    from audit.cli import demo_log_dirs

    args = ["audit", "--log-dirs", demo_log_dirs(), "--output", str(tmp_path / "o"), "--fail-on", "never"]
    assert main(args + ["--skip-reports", "--max-rows", "2"]) == 0
    printed = capsys.readouterr().out
    assert "... more findings in findings/ (showing 2)" in printed
    assert main(args + ["--max-rows", "0"]) == 2
    assert "--max-rows 0: give a number of rows of at least 1" in capsys.readouterr().err


def test_console_script_exit_runs_what_an_exit_runs(tmp_path):
    """audit.cli.entry ends the process quickly (exit_now) but as an exit would: the exit status of main(),
    threads that are not daemons joined (an idle ThreadPoolExecutor's worker told to end first, as an exit does:
    joining it without that hung), atexit handlers run, unflushed stdout written; a usage error still
    leaves through argparse (status 2).  A bare os._exit would lose the last three."""
    import subprocess
    import sys

    script = f"""
import atexit, sys, threading, time
from concurrent.futures import ThreadPoolExecutor
import audit.cli as cli
def fake_main(argv=None):
    atexit.register(lambda: open({str(tmp_path / "atexit")!r}, 'w').write('ran'))
    # an idle pool's worker (as the Spark Connect client leaves one): ends only when told to at exit
    cli.pool = ThreadPoolExecutor(max_workers=1)  # still referenced at exit
    cli.pool.submit(lambda: None).result()
    threading.Thread(target=lambda: (time.sleep(0.5), open({str(tmp_path / "thread")!r}, 'w').write('done'))).start()
    sys.stdout.write('no newline, not flushed')
    return 3
cli.main = fake_main
cli.entry()
"""
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 3, proc.stderr
    assert proc.stdout == "no newline, not flushed"
    assert (tmp_path / "atexit").read_text() == "ran" and (tmp_path / "thread").read_text() == "done"
    usage = subprocess.run(
        [sys.executable, "-m", "audit.cli", "audit", "--output", str(tmp_path / "out"), "--no-such-flag"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert usage.returncode == 2 and "--no-such-flag" in usage.stderr


def test_prewarm_shortens_the_switch_interval_until_joined():
    """While _prewarm imports beside the JVM's start the switch interval is PREWARM_SWITCH_INTERVAL at most;
    join() puts the caller's value back."""
    import sys

    from audit.cli.session import PREWARM_SWITCH_INTERVAL
    from audit.cli.session import prewarm as _prewarm

    before = sys.getswitchinterval()
    try:
        sys.setswitchinterval(0.004)
        warm = _prewarm(False)
        assert sys.getswitchinterval() <= PREWARM_SWITCH_INTERVAL
        warm.join()
        assert abs(sys.getswitchinterval() - 0.004) < 1e-9 and not warm.thread.is_alive()
    finally:
        sys.setswitchinterval(before)


def test_the_spark_submit_application_refuses_spark_connect_arguments(tmp_path):
    """Under spark-submit the cluster runs the application: --remote / --python-env are a usage error (exit 2)."""
    import subprocess
    import sys

    for args in (["--remote", "sc://127.0.0.1:1"], ["--python-env", "env.tar.gz"]):
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "audit.submit",
                *args,
                "--log-dirs",
                str(tmp_path),
                "--output",
                str(tmp_path / "out"),
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode == 2 and "ship the environment with --archives" in proc.stderr, proc.stderr
        assert not (tmp_path / "out").exists()


def test_kafka_tools_spellings_are_accepted():
    """``--bootstrap-server`` and ``--command-config`` (kafka-consumer-groups' names) set what ``--bootstrap-servers``
    and ``--client-config`` set, spelled out in full, not through argparse's prefix matching."""
    from audit.cli import build_parser

    parser = build_parser()
    kafka = parser.parse_args(
        ["audit", "--bootstrap-server", "b1:9092,b2:9092", "--command-config", "c.properties", "--output", "o"]
    )
    ours = parser.parse_args(
        ["audit", "--bootstrap-servers", "b1:9092,b2:9092", "--client-config", "c.properties", "--output", "o"]
    )
    assert (kafka.bootstrap_servers, kafka.client_config) == ("b1:9092,b2:9092", "c.properties")
    assert vars(kafka) == vars(ours)


@pytest.mark.slow
def test_format_json_prints_one_document_for_scripts(tmp_path, capsys):
    """``--format json``: stdout is one JSON document (progress on stderr); its counts are summary.json's and its
    rows the worst first, bounded by ``--max-rows``."""
    from audit.cli import demo_log_dirs

    out = tmp_path / "o"
    args = ["audit", "--log-dirs", demo_log_dirs(), "--output", str(out), "--skip-reports", "--format", "json"]
    assert main(args + ["--max-rows", "3"]) == 1  # the demo's critical findings fail the default --fail-on error
    captured = capsys.readouterr()
    doc = json.loads(captured.out)
    summary = json.loads((out / "summary.json").read_text())
    assert doc["exit_status"] == 1 and doc["output"] == str(out)
    assert doc["findings"] == summary["findings"] and doc["findings"]["by_severity"]["critical"] > 0
    assert len(doc["top_findings"]) == 3 and doc["top_findings_truncated"] is True
    assert doc["top_findings"][0]["severity"] == "critical"
    assert doc["groups"][0]["status"] == "AT_RISK" and len(doc["groups"]) <= 3
    assert doc["reset_plan"] == summary["reset_plan"] and doc["reset_plan"]["groups"] > 0
    assert "[kafka-offset-audit " in captured.err and "[kafka-offset-audit " not in captured.out


def test_a_connect_server_lacking_a_module_is_told_apart_from_the_client_lacking_it():
    """The server's worker error (its text, wrapped in the pipeline's stage error) names the module; the same
    ModuleNotFoundError raised in this process (the client lacks it) and an unrelated error name nothing."""
    from audit.cli import missing_server_module
    from audit.pipeline import AuditInternalError

    server = RuntimeError(
        "[PYTHON_EXCEPTION] ... File \"/x/worker.py\", line 3\nModuleNotFoundError: No module named 'pyarrow.ipc'"
    )
    assert missing_server_module(AuditInternalError("decode", server)) == "pyarrow"
    try:
        try:
            raise server
        except RuntimeError as inner:
            raise ValueError("the decode failed") from inner
    except ValueError as outer:
        assert missing_server_module(outer) == "pyarrow"
    assert missing_server_module(ModuleNotFoundError("No module named 'grpc'")) is None
    assert missing_server_module(AuditInternalError("judge", RuntimeError("division by zero"))) is None
