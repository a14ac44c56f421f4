"""Metrics: ``metrics.prom`` parsed by prometheus_client, pushed to a real Pushgateway, scraped by a real
Prometheus (Debian's ``prometheus`` and ``prometheus-pushgateway``, started here on loopback) whose
alert rule (``audit/report/prometheus-alerts.yml``) fires for the shared scenario's LOG_TRUNCATION."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
import urllib.parse
import urllib.request
from importlib import resources

import pytest
from prometheus_client.parser import text_string_to_metric_families

from ..paths import SCENARIO
from ..ports import free_port

PROMETHEUS, PUSHGATEWAY, PROMTOOL = "prometheus", "prometheus-pushgateway", "promtool"
needs_prometheus = pytest.mark.skipif(
    not all(shutil.which(b) for b in (PROMETHEUS, PUSHGATEWAY, PROMTOOL)),
    reason="Debian's prometheus and prometheus-pushgateway are not installed "
    "(apt-get install -y prometheus prometheus-pushgateway; .ci/run does)",
)


def _samples(text: str) -> dict[str, list]:
    out: dict[str, list] = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out.setdefault(s.name, []).append(s)
    return out


def _findings(out):
    import pyarrow.parquet as pq

    return pq.read_table(str(out / "findings")).to_pylist()


def _committed(out):
    import pyarrow.parquet as pq

    return pq.read_table(str(out / "committed_offsets")).to_pylist()


def _bounds(out):
    import pyarrow.parquet as pq

    return {(r["topic"], r["partition"]): r for r in pq.read_table(str(out / "bounds")).to_pylist()}


def test_metrics_file_matches_the_outputs(scenario_latest):
    """Every group-partition's offset, epoch, unclamped lag and verdict, and the finding counts, as in the tables."""
    result, out = scenario_latest
    s = _samples((out / "metrics.prom").read_text())
    committed, bounds, findings = _committed(out), _bounds(out), _findings(out)
    assert (
        len(s["kafka_offset_audit_committed_offset"])
        == len(committed)
        == result.summary["offset_commits"]["group_partitions"]
    )
    by_key = {
        (x.labels["group"], x.labels["topic"], int(x.labels["partition"])): x
        for x in s["kafka_offset_audit_committed_offset"]
    }
    lag = {
        (x.labels["group"], x.labels["topic"], int(x.labels["partition"])): x.value
        for x in s["kafka_offset_audit_lag_offsets"]
    }
    verdict = {
        (x.labels["group"], x.labels["topic"], int(x.labels["partition"])): x.labels
        for x in s["kafka_offset_audit_verdict"]
    }
    negative = 0
    for c in committed:
        k = (c["group_id"], c["topic"], c["partition"])
        assert by_key[k].value == c["committed_offset"]
        leo = bounds[(c["topic"], c["partition"])]["log_end_offset"]
        assert lag[k] == leo - c["committed_offset"]  # unclamped
        negative += lag[k] < 0
        assert verdict[k]["verdict"] == c["verdict"]
    assert negative >= 1, "the scenario has commits past the log end: their lag must be negative, not 0"
    sev = {x.labels["severity"]: x.value for x in s["kafka_offset_audit_findings_by_severity"]}
    for level in ("critical", "error", "warning", "info"):
        assert sev[level] == sum(1 for f in findings if f["severity"] == level)
    by_name = {}
    for f in findings:
        by_name[(f["finding"], f["severity"])] = by_name.get((f["finding"], f["severity"]), 0) + 1
    assert {(x.labels["finding"], x.labels["severity"]): x.value for x in s["kafka_offset_audit_findings"]} == by_name
    crit = {k for k, v in verdict.items() if v["severity"] == "critical"}
    assert crit == {(f["group_id"], f["topic"], f["partition"]) for f in findings if f["severity"] == "critical"}
    assert s["kafka_offset_audit_records_read"][0].value == result.summary["records_read"]["total"]
    assert s["kafka_offset_audit_run_success"][0].value == 1
    assert s["kafka_offset_audit_exit_status"][0].value == result.exit_code
    assert result.summary["metrics"]["group_partitions_left_out"] == 0


@pytest.mark.slow
def test_metrics_cap_keeps_the_worst(audit_dirs):
    result, out = audit_dirs("metrics-cap", [SCENARIO / "brokers"], metrics_max_group_partitions=3)
    s = _samples((out / "metrics.prom").read_text())
    kept = s["kafka_offset_audit_verdict"]
    assert len(kept) == 3 and {x.labels["severity"] for x in kept} == {"critical"}
    assert s["kafka_offset_audit_group_partitions_exported"][0].value == 3
    assert s["kafka_offset_audit_group_partitions"][0].value == result.summary["offset_commits"]["group_partitions"] > 3
    assert (
        result.summary["metrics"]["group_partitions_left_out"]
        == result.summary["offset_commits"]["group_partitions"] - 3
    )


def test_bad_pushgateway_arguments_fail_fast(tmp_path):
    from audit.cli import main

    port = free_port()  # nothing listens there
    assert (
        main(
            [
                "audit",
                "--log-dirs",
                str(SCENARIO / "brokers"),
                "--output",
                str(tmp_path / "o"),
                "--pushgateway",
                f"http://127.0.0.1:{port}",
            ]
        )
        == 2
    )
    assert not (tmp_path / "o").exists()
    assert (
        main(
            [
                "audit",
                "--log-dirs",
                str(SCENARIO / "brokers"),
                "--output",
                str(tmp_path / "o"),
                "--pushgateway",
                "pushgateway:9091",
            ]
        )
        == 2
    )
    assert (
        main(
            [
                "audit",
                "--log-dirs",
                str(SCENARIO / "brokers"),
                "--output",
                str(tmp_path / "o"),
                "--pushgateway-label",
                "job=x",
            ]
        )
        == 2
    )


# ----------------------------------------------------------------------------- real Pushgateway + Prometheus


def _get_json(url: str):
    with urllib.request.urlopen(url, timeout=5) as r:
        return json.load(r)


def _wait(what: str, fn, timeout: float = 60.0):
    deadline = time.time() + timeout
    last = None
    while time.time() < deadline:
        try:
            last = fn()
            if last:
                return last
        except OSError as exc:
            last = exc
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what}; last: {last!r}")


@pytest.fixture
def prometheus_stack(tmp_path):
    """A Pushgateway and a Prometheus (scraping it every second, the project's alert rules loaded)."""
    rules = resources.files("audit.report").joinpath("prometheus-alerts.yml")
    check = subprocess.run([PROMTOOL, "check", "rules", str(rules)], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    pg_port, prom_port = free_port(), free_port()
    (tmp_path / "prometheus.yml").write_text(
        "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
        f"rule_files: ['{rules}']\n"
        "scrape_configs:\n"
        "  - job_name: pushgateway\n"
        "    honor_labels: true\n"
        f"    static_configs: [{{targets: ['127.0.0.1:{pg_port}']}}]\n"
    )
    procs = [
        # an explicit, fresh persistence file: Debian's build defaults to a shared one, which would bring back
        # what earlier runs pushed
        subprocess.Popen(
            [
                PUSHGATEWAY,
                f"--web.listen-address=127.0.0.1:{pg_port}",
                f"--persistence.file={tmp_path / 'pushgateway.data'}",
            ],
            stdout=open(tmp_path / "pushgateway.log", "w"),
            stderr=subprocess.STDOUT,
        ),
        subprocess.Popen(
            [
                PROMETHEUS,
                f"--config.file={tmp_path / 'prometheus.yml'}",
                f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                f"--web.listen-address=127.0.0.1:{prom_port}",
            ],
            stdout=open(tmp_path / "prometheus.log", "w"),
            stderr=subprocess.STDOUT,
        ),
    ]
    try:
        pg, prom = f"http://127.0.0.1:{pg_port}", f"http://127.0.0.1:{prom_port}"
        _wait("the Pushgateway", lambda: urllib.request.urlopen(pg + "/-/ready", timeout=2).status == 200)
        _wait("Prometheus", lambda: urllib.request.urlopen(prom + "/-/ready", timeout=2).status == 200)
        yield pg, prom
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()


def _query(prom: str, expr: str) -> list:
    res = _get_json(prom + "/api/v1/query?" + urllib.parse.urlencode({"query": expr}))
    assert res["status"] == "success", res
    return res["data"]["result"]


@pytest.mark.slow
@needs_prometheus
def test_pushed_metrics_reach_prometheus_and_the_critical_alert_fires(prometheus_stack, tmp_path):
    """The CLI pushes to a real Pushgateway; Prometheus scrapes it and fires KafkaOffsetAuditCriticalFinding
    for exactly the group-partitions whose commit has a critical finding; a later failed run sets
    run_success 0 and keeps the last good run's metrics."""
    from audit.cli import main

    pg, prom = prometheus_stack
    out = tmp_path / "out"
    code = main(
        [
            "audit",
            "--log-dirs",
            str(SCENARIO / "brokers"),
            "--output",
            str(out),
            "--quiet",
            "--skip-reports",
            "--fail-on",
            "never",
            "--pushgateway",
            pg,
            "--pushgateway-label",
            "cluster=shared-scenario",
            "--master",
            "local[1]",
        ]
    )
    assert code == 0
    critical = {(f["group_id"], f["topic"], str(f["partition"])) for f in _findings(out) if f["severity"] == "critical"}
    assert critical

    # the Pushgateway holds what metrics.prom holds
    with urllib.request.urlopen(pg + "/metrics", timeout=5) as r:
        pushed = _samples(r.read().decode())
    local = _samples((out / "metrics.prom").read_text())
    got = {
        (x.labels["group"], x.labels["topic"], x.labels["partition"]): x.value
        for x in pushed["kafka_offset_audit_committed_offset"]
    }
    assert got == {
        (x.labels["group"], x.labels["topic"], x.labels["partition"]): x.value
        for x in local["kafka_offset_audit_committed_offset"]
    }
    labels = [x.labels for x in pushed["kafka_offset_audit_committed_offset"]]
    assert all(lb.get("job") == "kafka_offset_audit" and lb.get("cluster") == "shared-scenario" for lb in labels), (
        labels[:3]
    )

    # Prometheus scraped it, and the alert fires for the critical group-partitions only
    lag = _wait("scraped metrics", lambda: _query(prom, 'kafka_offset_audit_lag_offsets{cluster="shared-scenario"}'))
    assert any(float(x["value"][1]) < 0 for x in lag), "unclamped lag must reach Prometheus negative"

    def firing():
        alerts = _get_json(prom + "/api/v1/alerts")["data"]["alerts"]
        return [
            a
            for a in alerts
            if a["labels"]["alertname"] == "KafkaOffsetAuditCriticalFinding" and a["state"] == "firing"
        ]

    alerts = _wait("KafkaOffsetAuditCriticalFinding to fire", firing)
    assert {(a["labels"]["group"], a["labels"]["topic"], a["labels"]["partition"]) for a in alerts} == critical
    assert all(
        a["labels"]["verdict"] == "LOG_TRUNCATION" and a["labels"]["cluster"] == "shared-scenario" for a in alerts
    )

    # a failed run (bad --log-dirs after the preflight) records run_success 0, keeping the good run's results
    code = main(
        [
            "audit",
            "--log-dirs",
            str(tmp_path / "missing"),
            "--output",
            str(tmp_path / "out2"),
            "--quiet",
            "--pushgateway",
            pg,
            "--pushgateway-label",
            "cluster=shared-scenario",
            "--master",
            "local[1]",
        ]
    )
    assert code == 2
    with urllib.request.urlopen(pg + "/metrics", timeout=5) as r:
        pushed = _samples(r.read().decode())
    assert [x.value for x in pushed["kafka_offset_audit_run_success"]] == [0]
    assert [x.value for x in pushed["kafka_offset_audit_exit_status"]] == [2]
    assert len(pushed["kafka_offset_audit_committed_offset"]) == len(local["kafka_offset_audit_committed_offset"])
    _wait(
        "KafkaOffsetAuditFailed to fire",
        lambda: [
            a
            for a in _get_json(prom + "/api/v1/alerts")["data"]["alerts"]
            if a["labels"]["alertname"] == "KafkaOffsetAuditFailed" and a["state"] == "firing"
        ],
    )


def test_lost_lineage_metrics_and_alert(tmp_path):
    """REPLICA_DIVERGENCE rows become per-replica gauges; the alert fires for a lineage with committed or consumed
    records (severity error) and not for one of unreplicated records (warning): promtool's rule unit test."""
    from audit.report.metrics import build_registry, render

    summary = {"findings": {"by_severity": {"error": 1, "warning": 1}}, "offset_commits": {}, "records_read": {}}
    lost = [
        {
            "topic": "orders",
            "partition": 0,
            "replica_broker": 1,
            "divergence_offset": 30,
            "records_at_risk": 25,
            "severity": "error",
        },
        {
            "topic": "orders",
            "partition": 1,
            "replica_broker": 3,
            "divergence_offset": 7,
            "records_at_risk": 5,
            "severity": "warning",
        },
    ]
    got = _samples(render(build_registry(summary, [], lost=lost)).decode())
    assert sorted(
        (s.labels["partition"], s.labels["broker"], s.labels["severity"], s.value)
        for s in got["kafka_offset_audit_lost_lineage_records"]
    ) == [("0", "1", "error", 25), ("1", "3", "warning", 5)]
    assert sorted(
        (s.labels["partition"], s.value) for s in got["kafka_offset_audit_lost_lineage_divergence_offset"]
    ) == [("0", 30), ("1", 7)]
    if not shutil.which(PROMTOOL):
        pytest.skip("promtool (Debian's prometheus) is not installed; .ci/run installs it")
    from importlib import resources

    rules = resources.files("audit.report").joinpath("prometheus-alerts.yml")
    series = "".join(
        f'      - series: \'kafka_offset_audit_lost_lineage_records{{topic="orders",partition="{r["partition"]}",'
        f'broker="{r["replica_broker"]}",severity="{r["severity"]}"}}\'\n        values: \'{r["records_at_risk"]}x5\'\n'
        for r in lost
    )
    description = (
        "Broker 1's replica of orders-0 holds records past the divergence offset "
        "(kafka_offset_audit_lost_lineage_divergence_offset) that the partition's log does not have, after an "
        "unclean leader election: when that broker fetches again it truncates them. Copy its segments before "
        "it rejoins if the records must be recovered; the finding lists the groups that read them."
    )
    test = tmp_path / "lost-lineage-test.yml"
    test.write_text(
        f"rule_files:\n  - {rules}\nevaluation_interval: 1m\ntests:\n  - interval: 1m\n    input_series:\n{series}"
        "    alert_rule_test:\n      - eval_time: 2m\n        alertname: KafkaOffsetAuditLostLineage\n        exp_alerts:\n"
        '          - exp_labels: {severity: critical, topic: orders, partition: "0", broker: "1"}\n'
        "            exp_annotations:\n"
        '              summary: "Broker 1 holds 25 records of orders-0 that the partition lost"\n'
        f'              description: "{description}"\n'
    )
    res = subprocess.run([PROMTOOL, "test", "rules", str(test)], capture_output=True, text=True)
    assert res.returncode == 0, res.stdout + res.stderr
