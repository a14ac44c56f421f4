"""The Airflow DAG ``airflow_dags/kafka_offset_audit.py`` and :mod:`audit.airflow`, exercised in the Airflow environment.

Airflow and its Spark provider live in their own venv (``.venv-airflow``, built by
``bash scripts/airflow_env.sh``: the provider's pyspark-client would overwrite pyspark's files here).
These tests run under the main venv's pytest and drive that venv's Python through a small script
(``_SCRIPT`` below): a ``DagBag`` load with the DAG's structure, and ``dag.test()`` runs of the whole
DAG -- spark-submit of the installed ``audit/submit.py`` on ``local[2]``, then ``check_expectations`` -- over
the bundled unclean-election scenario, with a temporary ``AIRFLOW_HOME`` and SQLite.  The DAG file is an example
over ``build_dag`` of the installed package (``audit.airflow``), which ``test_build_dag_with_grouped_settings``
calls directly.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from ..jvm import submit_env
from ..paths import REPO
from ..ports import free_port

AIRFLOW_VENV = Path(os.environ.get("KOA_AIRFLOW_VENV", REPO / ".venv-airflow"))
AIRFLOW_PY = AIRFLOW_VENV / "bin" / "python"
DAGS = REPO / "airflow_dags"
DEMO_LOG_DIRS = REPO / "audit" / "demo_data" / "unclean-election-3brokers" / "brokers"
RUN_TIMEOUT = 600

_SCRIPT = r"""
import json, os, sys

from airflow.dag_processing.dagbag import DagBag

mode = sys.argv[1]
bag = DagBag(dag_folder=os.environ["AIRFLOW__CORE__DAGS_FOLDER"])
out = {"import_errors": {k: str(v) for k, v in bag.import_errors.items()}, "dag_ids": sorted(bag.dags)}
dag = bag.dags.get("kafka_offset_audit")
if dag is not None and mode == "structure":
    from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
    out["tasks"] = {
        t.task_id: {"upstream": sorted(t.upstream_task_ids), "downstream": sorted(t.downstream_task_ids),
                    "retries": t.retries,
                    "execution_timeout": t.execution_timeout.total_seconds() if t.execution_timeout else None,
                    "spark_submit": isinstance(t, SparkSubmitOperator)}
        for t in dag.tasks}
    submit = dag.get_task("audit_offsets")
    module = sys.modules[type(submit).__module__]  # audit.airflow.operators, the installed package's
    out["operator_module"] = [module.__name__, module.__file__]
    out["submit"] = {"application": submit.application, "spark_binary": submit._spark_binary,
                     "conn_id": submit._conn_id, "env_vars": submit.env_vars}
    out["params"] = dag.params.dump()
    out["schedule"] = str(getattr(dag, "schedule", None))
    out["max_active_runs"] = dag.max_active_runs
    env = dag.get_template_env()
    params = dict(out["params"], log_dirs=["/a/broker-1", "/a/broker-2"], expectations_config="/e.yaml",
                  fail_on="never")
    rendered = [env.from_string(a).render(params=params, run_id="r1") if isinstance(a, str) else a
                for a in submit.application_args]
    out["rendered_args"] = module._flatten(rendered)
    params = dict(params, pushgateway="http://pg:9091", pushgateway_labels=["cluster=a", "dc=b"], history="/h")
    out["rendered_args_ops"] = module._flatten([env.from_string(a).render(params=params, run_id="r1")
                                                if isinstance(a, str) else a for a in submit.application_args])
    out["sys_executable"] = sys.executable
elif mode == "custom":
    import datetime as dt

    from audit.airflow import Alerts, AuditAlertNotifier, AuditParams, SparkSettings, build_dag
    from audit.pipeline.config import AuditConfig

    custom = build_dag(
        "kafka_offset_audit_cluster_b",
        params=AuditParams(log_dirs=["/b/broker-1", "/b/broker-2"], output="/audits/b", mode="history",
                           fail_on="critical", spark_conn_id="spark_b", pushgateway="http://pg:9091",
                           pushgateway_labels=["cluster=b"], history="/h/b"),
        spark=SparkSettings(application="/opt/koa/app.py", spark_binary="/opt/spark/bin/spark-submit",
                            spark_conf={"spark.executor.memory": "2g"}, pyspark_python="/opt/py/bin/python",
                            executor_env="/envs/koa.tar.gz"),
        alerts=Alerts(email=["b-oncall@example.com"], slack_conn_id="slack_b", slack_channel="#kafka-b"),
        schedule="@hourly", retries=4, retry_delay=dt.timedelta(seconds=30),
        audit_timeout=dt.timedelta(minutes=20), check_timeout=dt.timedelta(minutes=3))
    submit = custom.get_task("audit_offsets")
    check = custom.get_task("check_expectations")
    notifiers = submit.on_failure_callback or []
    out["custom"] = {
        "dag_id": custom.dag_id, "params": custom.params.dump(), "schedule": str(custom.schedule),
        "task_ids": sorted(custom.task_ids), "application": submit.application, "spark_binary": submit._spark_binary,
        "conn_id": submit._conn_id, "conf": submit.conf, "env_vars": submit.env_vars, "archives": submit._archives,
        "connect_python": submit.connect_python, "connect_env": submit.connect_env,
        "retries": [submit.retries, check.retries],
        "timeouts": [submit.execution_timeout.total_seconds(), check.execution_timeout.total_seconds()],
        "notifiers": [[type(n).__name__, n.email_to, n.slack_conn_id, n.slack_channel] for n in notifiers],
        "check_notified": len(check.on_failure_callback or []),
        "module": build_dag.__module__,
    }
    plain = build_dag("kafka_offset_audit_plain")
    out["plain"] = {"params": plain.params.dump(), "notifiers": plain.get_task("audit_offsets").on_failure_callback}
    out["cli_fail_on"] = AuditConfig.model_fields["fail_on"].default
    import audit.airflow
    out["package_file"] = audit.airflow.__file__
    bad = {}
    for field, value in (("fail_on", "fatal"), ("mode", "all"), ("log_dirs", "/one/string")):
        try:
            AuditParams(**{field: value})
        except ValueError as exc:
            bad[field] = str(exc)
    out["bad"] = bad
elif dag is not None and mode == "gated":
    from audit.report.evaluation import gated_finding_lines  # what the DAG's check_expectations logs
    out["lines"] = gated_finding_lines(sys.argv[2], json.loads(sys.argv[3]))
elif dag is not None and mode == "run":
    run = dag.test(run_conf=json.loads(sys.argv[2]))
    out["state"] = str(getattr(run.state, "value", run.state))
    out["tis"] = {ti.task_id: {"state": str(getattr(ti.state, "value", ti.state)), "try_number": ti.try_number}
                  for ti in run.get_task_instances()}
print("RESULT " + json.dumps(out, default=str), flush=True)
"""


@pytest.fixture(scope="module")
def airflow_env(tmp_path_factory):
    """Environment for the Airflow venv's Python: temp AIRFLOW_HOME, SQLite, spark_default = local[2]."""
    if not AIRFLOW_PY.is_file():
        pytest.fail(
            f"the Airflow environment {AIRFLOW_VENV} is missing: run `bash scripts/airflow_env.sh` first "
            "(it builds .venv-airflow with apache-airflow, the Spark provider and pyspark 4.2.0)"
        )
    home = tmp_path_factory.mktemp("airflow-home")
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("AIRFLOW", "PYSPARK_", "SPARK_", "KOA_AIRFLOW_"))
        and k not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME")
    }
    env.update(
        {
            "AIRFLOW_HOME": str(home),
            "AIRFLOW__CORE__DAGS_FOLDER": str(DAGS),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home}/airflow.db",
            "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": "local[2]"}),
            "KOA_SHUFFLE_PARTITIONS": "2",
            "KOA_DRIVER_MEMORY": "1g",
            # one retry allowed: the runs below show findings and bad input are *not* retried
            "KOA_AIRFLOW_RETRIES": "1",
            "KOA_AIRFLOW_RETRY_DELAY_SECONDS": "1",
            "KOA_AIRFLOW_AUDIT_TIMEOUT_MINUTES": "45",
            "KOA_AIRFLOW_CHECK_TIMEOUT_MINUTES": "10",
            "PATH": f"{AIRFLOW_VENV / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
        }
    )
    env = submit_env(env)  # the DAG's spark-submit drivers start as the CLI's own driver does
    migrate = subprocess.run(
        [str(AIRFLOW_VENV / "bin" / "airflow"), "db", "migrate"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        cwd=home,
    )
    assert migrate.returncode == 0, (migrate.stdout + migrate.stderr)[-3000:]
    return env


def _script(env, *args) -> tuple[dict, str]:
    proc = subprocess.run(
        [str(AIRFLOW_PY), "-c", _SCRIPT, *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT,
        cwd=env["AIRFLOW_HOME"],
    )
    log = proc.stdout + proc.stderr
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, log[-5000:]
    return json.loads(lines[-1][len("RESULT ") :]), log


def _run(env, tmp_path, **conf) -> tuple[dict, str, Path]:
    out = tmp_path / "audit-out"
    conf = {"log_dirs": [str(DEMO_LOG_DIRS)], "output": str(out), **conf}
    result, log = _script(env, "run", json.dumps(conf))
    assert not result["import_errors"], result["import_errors"]
    return result, log, out


def test_dagbag_imports_and_structure(airflow_env):
    result, log = _script(airflow_env, "structure")
    assert result["import_errors"] == {}, result["import_errors"]
    assert result["dag_ids"] == ["kafka_offset_audit"]
    tasks = result["tasks"]
    assert set(tasks) == {"audit_offsets", "check_expectations"}
    assert tasks["audit_offsets"] == {
        "upstream": [],
        "downstream": ["check_expectations"],
        "retries": 1,
        "execution_timeout": 45 * 60,
        "spark_submit": True,
    }
    assert tasks["check_expectations"] == {
        "upstream": ["audit_offsets"],
        "downstream": [],
        "retries": 0,
        "execution_timeout": 10 * 60,
        "spark_submit": False,
    }
    submit = result["submit"]
    # the application inside the package installed (not -e) in the Airflow venv: what a wheel deployment has
    app = Path(submit["application"])
    assert app.name == "submit.py" and app.parent.name == "audit" and app.parent.parent.name == "site-packages", app
    assert AIRFLOW_VENV.resolve() in app.parents and not (app.parent / ".." / ".." / "jobs").exists()
    assert (app.parent / "sql" / "finding_log_truncation.sql").is_file()
    assert submit["spark_binary"] == str(AIRFLOW_VENV / "bin" / "spark-submit")
    assert submit["conn_id"] == "spark_default"
    assert submit["env_vars"] == {"PYSPARK_PYTHON": result["sys_executable"]}
    assert result["params"] == {
        "log_dirs": [],
        "kafka_conn_id": None,
        "output": "/tmp/kafka-offset-audit",
        "mode": "latest",
        "fail_on": "error",  # the CLI's --fail-on default
        "spark_conn_id": "spark_default",
        "expectations_config": None,
        "pushgateway": None,
        "pushgateway_labels": [],
        "history": None,
        "spark_connect_conn_id": None,
    }
    assert result["schedule"] == "@daily"
    assert result["max_active_runs"] == 1
    # the operator comes from the installed package, not the DAG file (a thin example over build_dag)
    name, file = result["operator_module"]
    assert name == "audit.airflow.operators" and AIRFLOW_VENV.resolve() in Path(file).resolve().parents, file
    # list-valued params expand in place; the optional --expectations-config appears only when set
    assert result["rendered_args"] == [
        "--log-dirs",
        "/a/broker-1",
        "/a/broker-2",
        "--output",
        "/tmp/kafka-offset-audit",
        "--mode",
        "latest",
        "--fail-on",
        "never",
        "--expectations-config",
        "/e.yaml",
    ]
    # the ops params: metrics pushed with grouping labels, history keyed by the Airflow run id
    assert result["rendered_args_ops"] == result["rendered_args"] + [
        "--pushgateway",
        "http://pg:9091",
        "--pushgateway-label",
        "cluster=a",
        "dc=b",
        "--history",
        "/h",
        "--run-id",
        "r1",
    ]


def test_build_dag_with_grouped_settings(airflow_env):
    """``build_dag`` of the installed package builds a second DAG from grouped settings: its params' defaults are the
    ``AuditParams`` given, the submit takes the ``SparkSettings``, both tasks notify the ``Alerts``; without settings
    the defaults are the CLI's (``fail_on`` error) and no notifier; bad settings fail when built."""
    result, _log = _script(airflow_env, "custom")
    custom = result["custom"]
    assert custom["dag_id"] == "kafka_offset_audit_cluster_b"
    assert custom["params"] == {
        "log_dirs": ["/b/broker-1", "/b/broker-2"],
        "kafka_conn_id": None,
        "output": "/audits/b",
        "mode": "history",
        "fail_on": "critical",
        "spark_conn_id": "spark_b",
        "expectations_config": None,
        "pushgateway": "http://pg:9091",
        "pushgateway_labels": ["cluster=b"],
        "history": "/h/b",
        "spark_connect_conn_id": None,
    }
    assert custom["schedule"] == "@hourly"
    assert custom["task_ids"] == ["audit_offsets", "check_expectations"]
    assert custom["application"] == "/opt/koa/app.py"
    assert custom["spark_binary"] == "/opt/spark/bin/spark-submit"
    assert custom["conn_id"] == "spark_b"
    assert custom["conf"] == {"spark.executor.memory": "2g"}
    assert custom["archives"] == "/envs/koa.tar.gz#env"
    assert custom["env_vars"] == {"PYSPARK_PYTHON": "./env/bin/python", "PYSPARK_DRIVER_PYTHON": "/opt/py/bin/python"}
    assert (custom["connect_python"], custom["connect_env"]) == ("/opt/py/bin/python", "/envs/koa.tar.gz")
    assert custom["retries"] == [4, 0]  # check_expectations never retries
    assert custom["timeouts"] == [20 * 60, 3 * 60]
    assert custom["notifiers"] == [["AuditAlertNotifier", ["b-oncall@example.com"], "slack_b", "#kafka-b"]]
    assert custom["check_notified"] == 1
    assert custom["module"] == "audit.airflow.dag"
    assert AIRFLOW_VENV.resolve() in Path(result["package_file"]).resolve().parents
    # the defaults: the CLI's gate, no alert target
    assert result["plain"]["params"]["fail_on"] == result["cli_fail_on"] == "error"
    assert result["plain"]["params"]["output"] == "/tmp/kafka-offset-audit"
    assert result["plain"]["notifiers"] in (None, [])
    assert set(result["bad"]) == {"fail_on", "mode", "log_dirs"}, result["bad"]
    assert "fail_on takes one of critical, error, warning, never" in result["bad"]["fail_on"]


def test_run_passes_without_a_severity_gate(airflow_env, tmp_path, request):
    """fail_on=never passes with the expectation thresholds given; where Debian's Prometheus is installed (CI) the
    same run's pushgateway params reach the job: Prometheus scrapes its metrics from a real Pushgateway and
    KafkaOffsetAuditCriticalFinding fires for exactly the scenario's critical group-partitions."""
    import shutil as _shutil

    from ..report.test_prometheus import PROMETHEUS, PROMTOOL, PUSHGATEWAY, _query, _wait

    thresholds = tmp_path / "expectations.json"  # params.expectations_config reaches the job's Checkpoint
    thresholds.write_text(json.dumps({"build_data_docs": False, "min_verifiable_commit_share": 0.5}))
    metrics = all(_shutil.which(b) for b in (PROMETHEUS, PUSHGATEWAY, PROMTOOL))
    push = {}
    if metrics:
        pg, prom = request.getfixturevalue("prometheus_stack")
        push = {"pushgateway": pg, "pushgateway_labels": ["cluster=dag"]}
    result, log, out = _run(airflow_env, tmp_path, fail_on="never", expectations_config=str(thresholds), **push)
    assert result["state"] == "success", log[-5000:]
    assert result["tis"] == {
        "audit_offsets": {"state": "success", "try_number": 1},
        "check_expectations": {"state": "success", "try_number": 1},
    }
    summary = json.loads((out / "summary.json").read_text())
    assert summary["findings"]["by_name"]["LOG_TRUNCATION"] == 3
    assert json.loads((out / "expectations" / "validation_result.json").read_text())["success"] is True
    assert "kafka-offset-audit PASSED" in log
    assert "findings by severity: critical=3 error=4 warning=3 info=5" in log
    assert "expectation suite: passed" in log
    assert f"'--expectations-config', '{thresholds}'" in log
    assert not (out / "data_docs").exists()
    if not metrics:
        print("Prometheus is not installed: the DAG's pushgateway params were not exercised")
        return
    import pyarrow.parquet as pq

    critical = {
        (f["group_id"], f["topic"], str(f["partition"]))
        for f in pq.read_table(str(out / "findings")).to_pylist()
        if f["severity"] == "critical"
    }
    got = _wait(
        "the DAG run's metrics in Prometheus",
        lambda: _query(prom, 'kafka_offset_audit_run_success{cluster="dag", job="kafka_offset_audit"} == 1'),
    )
    assert len(got) == 1

    def firing():
        res = _query(prom, 'ALERTS{alertname="KafkaOffsetAuditCriticalFinding", alertstate="firing", cluster="dag"}')
        return res if len(res) == len(critical) else None

    alerts = _wait("the critical-finding alert", firing)
    assert {(a["metric"]["group"], a["metric"]["topic"], a["metric"]["partition"]) for a in alerts} == critical


@pytest.fixture
def smtp_sink():
    """A local SMTP server (aiosmtpd) capturing every message: (port, list of email.message.Message)."""
    import email

    from aiosmtpd.controller import Controller

    class Sink:
        def __init__(self):
            self.messages = []

        async def handle_DATA(self, server, session, envelope):  # noqa: N802 - aiosmtpd's hook name
            msg = email.message_from_bytes(envelope.original_content or envelope.content)
            self.messages.append((envelope.rcpt_tos, msg))
            return "250 OK"

    port = free_port()
    sink = Sink()
    ctl = Controller(sink, hostname="127.0.0.1", port=port)
    ctl.start()
    try:
        yield port, sink.messages
    finally:
        ctl.stop()


def _html_part(msg) -> str:
    for part in msg.walk():
        if part.get_content_type() == "text/html":
            return part.get_payload(decode=True).decode(part.get_content_charset() or "utf-8")
    raise AssertionError("no text/html part in the alert email")


def test_run_fails_loudly_at_the_default_gate_error(airflow_env, tmp_path, smtp_sink):
    """The ``fail_on`` param's default is ``error``, the CLI's: the scenario's critical and error findings fail the
    run in ``check_expectations`` (the critical ones listed first), without a retry.  Airflow's notifier emails
    them, each with its action, through the SMTP connection (the findings below the gate counted, not listed); the
    run is appended to the history under its Airflow run id."""
    port, messages = smtp_sink
    env = dict(
        airflow_env,
        KOA_AIRFLOW_ALERT_EMAIL="kafka-oncall@example.com",
        KOA_AIRFLOW_ALERT_FROM="airflow@example.com",
        AIRFLOW_CONN_SMTP_DEFAULT=json.dumps(
            {
                "conn_type": "smtp",
                "host": "127.0.0.1",
                "port": port,
                "extra": {"disable_tls": True, "disable_ssl": True},
            }
        ),
    )
    hist = tmp_path / "history"
    result, log, out = _run(env, tmp_path, history=str(hist))
    assert result["state"] == "failed", log[-5000:]
    # the job's exit status 1 (findings) is left to check_expectations, which fails without retrying
    assert result["tis"] == {
        "audit_offsets": {"state": "success", "try_number": 1},
        "check_expectations": {"state": "failed", "try_number": 1},
    }
    assert "'--fail-on', 'error'" in log
    assert "exited with status 1" in log
    assert "kafka-offset-audit FAILED" in log and "(fail_on=error)" in log
    assert "findings by severity: critical=3 error=4 warning=3 info=5" in log
    assert "failed checks: findings.no_failing_severity" in log
    assert "findings at or above error: critical=3, error=4" in log
    assert "findings at or above fail_on: critical=3, error=4" in log
    assert "critical LOG_TRUNCATION group=dev-settlement dev.payments[0] committed=100" in log
    assert (out / "report.html").is_file()

    # the alert: one email, listing exactly the findings at or above the gate with their actions
    import pyarrow.parquet as pq

    gated = [f for f in pq.read_table(str(out / "findings")).to_pylist() if f["severity"] in ("critical", "error")]
    assert len(gated) == 7 and len(messages) == 1, log[-3000:]
    rcpt, msg = messages[0]
    assert rcpt == ["kafka-oncall@example.com"]
    assert msg["Subject"].startswith(f"kafka-offset-audit: {len(gated)} finding(s) at or above error (critical first)")
    body = _html_part(msg)
    assert body.count("<td><b>critical</b></td>") == 3 and body.count("<td><b>error</b></td>") == 4
    assert body.index("<td><b>critical</b></td>") < body.index("<td><b>error</b></td>")
    assert "<b>warning</b>" not in body and "<b>info</b>" not in body  # below the gate: counted, not listed
    for f in gated:
        action = f["detail"].split(" Action: ", 1)[1].strip()
        assert f"<td>{f['group_id']}</td><td>{f['topic']}-{f['partition']}</td>" in body
        assert action.replace("<", "&lt;").replace(">", "&gt;") in body
    assert "critical=3, error=4, warning=3, info=5" in body
    # the reset plan goes with it: its README.md and each planned group's CSV file, as written
    attached = {part.get_filename(): part.get_payload(decode=True) for part in msg.walk() if part.get_filename()}
    plan = json.loads((out / "reset_plan" / "plan.json").read_text())
    assert plan["groups"] and set(attached) == {"README.md", *(g["file"] for g in plan["groups"])}
    assert all(attached[g["file"]] == (out / "reset_plan" / g["file"]).read_bytes() for g in plan["groups"])
    assert "Reset plan:" in body

    # the history holds this run under its Airflow run id
    summary = json.loads((out / "summary.json").read_text())
    run_id = summary["history"]["run_id"]
    assert run_id.startswith("manual__") and summary["history"]["new"] == summary["findings"]["total"]
    assert [p.name for p in (hist / "runs").glob("run_date=*/*")] == [f"run_id={run_id}".replace(":", "%3A")]


def test_gated_findings_are_the_most_severe_first_and_bounded(airflow_env, tmp_path):
    """check_expectations logs at most MAX_LOGGED_FINDINGS (20) gated findings, in severity order,
    reading findings/ batch by batch; the others are counted."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [
        {
            "group_id": f"g{i:02d}",
            "topic": "t",
            "partition": i % 3,
            "finding": f,
            "severity": sev,
            "committed_offset": 100 + i,
            "committed_leader_epoch": 1,
            "detail": f"detail {i}",
        }
        for i, (f, sev) in enumerate(
            [("OFFSET_OUT_OF_RANGE", "error")] * 15
            + [("LOG_TRUNCATION", "critical")] * 10
            + [("EPOCH_UNVERIFIABLE", "info")] * 30
        )
    ]
    (tmp_path / "findings").mkdir()
    table = pa.Table.from_pylist(rows)
    for k in range(0, len(rows), 7):  # several files and batches
        pq.write_table(table.slice(k, 7), tmp_path / "findings" / f"part-{k:03d}.parquet")
    result, _log = _script(airflow_env, "gated", str(tmp_path), json.dumps(["critical", "error"]))
    lines = result["lines"]
    assert len(lines) == 21 and lines[-1] == f"... and 5 more in {tmp_path}/findings/"
    assert [ln.split()[0] for ln in lines[:20]] == ["critical"] * 10 + ["error"] * 10
    assert lines[0].startswith("critical LOG_TRUNCATION group=g15 t[0] committed=115 epoch=1: detail 15")
    assert lines[10].startswith("error OFFSET_OUT_OF_RANGE group=g00 t[0] committed=100")


def test_bad_input_fails_the_submit_without_retry(airflow_env, tmp_path):
    result, log, _ = _run(airflow_env, tmp_path, log_dirs=[str(tmp_path / "no-such-broker")], fail_on="never")
    assert result["state"] == "failed", log[-5000:]
    assert result["tis"]["audit_offsets"] == {"state": "failed", "try_number": 1}
    assert result["tis"]["check_expectations"]["state"] == "upstream_failed"
    assert "exited with status 2" in log


def test_an_internal_error_fails_the_task_not_as_findings(airflow_env, tmp_path):
    """Exit status 3: the installed application with its HTML report stage failing (the same injection as
    tests/pipeline/test_stage_failures.py) fails audit_offsets naming the stage; no findings alert (check_expectations
    does not run); the judged tables are in the output."""
    app = tmp_path / "app_with_failing_report.py"
    app.write_text(
        "import sys\nimport audit.report.html as html\n\n"
        "def boom(*a, **k):\n    raise RuntimeError('injected report failure')\n\n"
        "html.write_html_report = boom\nfrom audit.submit import main\nsys.exit(main())\n"
    )
    env = dict(airflow_env, KOA_AIRFLOW_APPLICATION=str(app), KOA_AIRFLOW_RETRIES="0")
    result, log, out = _run(env, tmp_path, fail_on="never")
    assert result["state"] == "failed", log[-5000:]
    assert result["tis"]["audit_offsets"]["state"] == "failed"
    assert result["tis"]["check_expectations"]["state"] == "upstream_failed"
    assert (
        "exited with status 3, an internal error (not findings): failed stage(s) ['html_report: RuntimeError: "
        "injected report failure']" in log
    ), log[-5000:]
    assert (out / "findings").is_dir() and json.loads((out / "summary.json").read_text())["exit_status"] == 3


def test_dag_submits_to_a_standalone_cluster_with_the_packed_environment(
    airflow_env,
    tmp_path,
    standalone,  # noqa: F811
    packed_env,
    scenario_latest,
):  # noqa: F811
    """A spark:// connection and KOA_AIRFLOW_EXECUTOR_ENV: the DAG submits the installed application to a standalone
    cluster whose Python has nothing installed, shipping the packed environment; the findings equal the local
    run's and the workers' executors ran the tasks."""
    import pyarrow.parquet as pq

    url, works, _empty, _base = standalone
    host, port = url.rsplit(":", 1)
    env = dict(
        airflow_env,
        KOA_AIRFLOW_EXECUTOR_ENV=str(packed_env),
        SPARK_LOCAL_IP="127.0.0.1",
        AIRFLOW_CONN_SPARK_STANDALONE=json.dumps({"conn_type": "spark", "host": host, "port": int(port)}),
    )
    before = {p for w in works for p in w.glob("app-*")}
    result, log, out = _run(env, tmp_path, fail_on="never", spark_conn_id="spark_standalone")
    assert result["state"] == "success", log[-5000:]
    assert f"--archives {packed_env}#env" in log and url in log, log[-5000:]

    def rows(d):
        return sorted(
            (r["group_id"], r["topic"], r["partition"], r["finding"], r["severity"])
            for r in pq.read_table(str(d / "findings")).to_pylist()
        )

    assert rows(out) == rows(scenario_latest[1])
    apps = {p for w in works for p in w.glob("app-*")} - before
    assert apps and any("Finished task" in e.read_text(errors="replace") for a in apps for e in a.glob("*/stderr"))


def test_dag_runs_through_spark_connect_with_the_packed_environment(
    airflow_env, tmp_path, connect_server, packed_env, scenario_latest
):
    """The ``spark_connect_conn_id`` param (a ``spark_connect`` connection): the task runs the audit through a Spark
    Connect server whose workers' Python is empty, from the Airflow venv (pyspark-client and the project, no JVM
    started: ``java`` fails there), shipping the packed environment; the findings equal the local run's."""
    import pyarrow.parquet as pq
    from ..spark.test_spark_connect import no_java_env

    url, log_file, _py = connect_server
    host, port = url[len("sc://") :].rsplit(":", 1)
    nojava = no_java_env(tmp_path)
    env = dict(
        airflow_env,
        KOA_AIRFLOW_EXECUTOR_ENV=str(packed_env),
        JAVA_HOME=nojava["JAVA_HOME"],
        PATH=nojava["PATH"].split(os.pathsep)[0] + os.pathsep + airflow_env["PATH"],
        AIRFLOW_CONN_SPARK_CONNECT_LAB=json.dumps({"conn_type": "spark_connect", "host": host, "port": int(port)}),
    )
    before = log_file.read_text().count("is finished")
    result, log, out = _run(env, tmp_path, fail_on="never", spark_connect_conn_id="spark_connect_lab")
    assert result["state"] == "success", log[-5000:]
    assert "running the audit through Spark Connect (connection 'spark_connect_lab')" in log, log[-5000:]
    assert "--python-env" in log and str(packed_env) in log, log[-5000:]

    def rows(d):
        return sorted(
            (r["group_id"], r["topic"], r["partition"], r["finding"], r["severity"])
            for r in pq.read_table(str(d / "findings")).to_pylist()
        )

    assert rows(out) == rows(scenario_latest[1])
    assert log_file.read_text().count("is finished") > before  # the server ran the jobs


def test_a_live_audit_runs_from_a_kafka_connection(airflow_env, tmp_path, lab_live):
    """The ``kafka_conn_id`` param: the DAG audits a real lab cluster live through an Airflow connection of type
    ``kafka`` whose extra (the Kafka provider's librdkafka names, consumer settings included) holds the bootstrap
    servers and client properties, none of them in the DAG file or the run's params; the client file is gone
    after the run; the findings equal the embedded live run's.  Then log dirs and the connection together are
    refused without a retry."""
    import pyarrow.parquet as pq

    bootstrap, local = lab_live
    extra = {
        "bootstrap.servers": bootstrap,
        "security.protocol": "PLAINTEXT",
        "client.id": "koa-airflow-lab",
        "group.id": "airflow-consumers",  # a consumer's setting the audit, which joins no group, leaves out
    }
    env = dict(airflow_env, AIRFLOW_CONN_KAFKA_LAB=json.dumps({"conn_type": "kafka", "extra": extra}))
    out = tmp_path / "audit-out"
    result, log = _script(
        env, "run", json.dumps({"kafka_conn_id": "kafka_lab", "output": str(out), "fail_on": "never"})
    )
    assert result["state"] == "success", log[-5000:]
    assert f"live audit of {bootstrap} through connection 'kafka_lab' (2 client properties)" in log, log[-5000:]
    assert "--client-config" in log and not list(Path(os.environ.get("TMPDIR", "/tmp")).glob("koa-kafka-*"))

    def rows(d):
        return sorted(
            (r["group_id"], r["topic"], r["partition"], r["finding"], r["severity"])
            for r in pq.read_table(str(d / "findings")).to_pylist()
        )

    assert rows(out) and rows(out) == rows(local)
    both, log = _script(
        env,
        "run",
        json.dumps({"kafka_conn_id": "kafka_lab", "log_dirs": [str(DEMO_LOG_DIRS)], "output": str(out)}),
    )
    assert both["state"] == "failed" and both["tis"]["audit_offsets"]["try_number"] == 1, log[-3000:]
    assert "not both" in log


from ..report.test_prometheus import prometheus_stack  # noqa: E402,F401 - fixture
