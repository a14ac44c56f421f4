"""Reset plans from findings: which offset answers which finding, which groups get none, Kafka's CSV as written,
and the plan the audit writes (the lab proves the plans with Kafka's own tool and consumer:
``tests/lab/test_lab_reset_plan.py``)."""

import json

from audit.cli import main
from audit.report.reset_plan import build_reset_plan, read_plan_inputs, write_reset_plan


def _f(group, finding, committed, severity="error", topic="t", partition=0, divergence_offset=None):
    return dict(
        group_id=group, topic=topic, partition=partition, finding=finding, severity=severity,
        committed_offset=committed, divergence_offset=divergence_offset, log_start_offset=10, log_end_offset=100,
    )  # fmt: skip


def test_each_finding_gets_its_rule_and_the_truncation_wins_on_one_partition():
    findings = [
        _f("g", "LOG_TRUNCATION", 150, "critical", divergence_offset=60),
        _f("g", "OFFSET_OUT_OF_RANGE", 150, partition=0),  # the same partition: the divergence offset wins
        _f("g", "OFFSET_OUT_OF_RANGE", 4, partition=1),
        _f("g", "OFFSET_OUT_OF_RANGE", 130, partition=2),
        _f("g", "OFFSET_REWIND", 50, "warning", partition=3),
        _f("g", "EPOCH_UNVERIFIABLE", 50, "info", partition=4),
    ]
    plan = build_reset_plan(findings, {}, "warning", high_watermarks={("t", 2): 95})
    (g,) = plan.groups
    got = {(r.partition, r.reset_to, r.rule, r.records) for r in g.rows}
    assert got == {
        (0, 60, "the divergence offset", 90),
        (1, 10, "the log start offset", 6),
        (2, 95, "the log end offset", 35),  # the high watermark, what Kafka's tool clamps to
    }
    assert plan.not_reset == {"OFFSET_REWIND": 1}  # info is below --fail-on warning


def test_groups_kafka_would_refuse_or_that_need_another_tool_get_no_plan():
    findings = [_f(g, "OFFSET_OUT_OF_RANGE", 4) for g in ("live", "empty", "share-g", "no-record")]
    groups = {
        "live": {"group_state": "Stable", "group_members": 2, "group_type": "classic"},
        "empty": {"group_state": "Empty", "group_members": 0, "group_type": "consumer"},
        "share-g": {"group_state": "Empty", "group_members": 0, "group_type": "share"},
    }
    plan = build_reset_plan(findings, groups, "error")
    assert [g.group_id for g in plan.groups] == ["empty", "no-record"]
    assert "2 member(s) (state Stable)" in plan.no_plan["live"] and "kafka-share-groups" in plan.no_plan["share-g"]
    assert build_reset_plan(findings, groups, "critical").groups == []  # error findings are below the gate


def test_the_files_are_kafkas_single_group_csv_and_odd_group_ids_get_safe_names(tmp_path):
    findings = [
        _f("a/b c", "OFFSET_OUT_OF_RANGE", 4, topic="x.y", partition=3),
        _f("A/B C", "OFFSET_OUT_OF_RANGE", 130, topic="x.y", partition=0),
    ]
    plan = build_reset_plan(findings, {}, "error")
    d = write_reset_plan(plan, str(tmp_path / "plan"))
    files = {g.group_id: g.file for g in plan.groups}
    assert len(set(files.values())) == 2 and all("/" not in f and " " not in f for f in files.values())
    assert (tmp_path / "plan" / files["a/b c"]).read_text() == "x.y,3,10\n"  # topic,partition,offset: no header
    doc = json.loads((tmp_path / "plan" / "plan.json").read_text())
    assert (
        doc["groups"][0]["commands"]["dry_run"].endswith("--dry-run")
        and "'a/b c'" in doc["groups"][1]["commands"]["execute"]
        or "'a/b c'" in doc["groups"][0]["commands"]["execute"]
    )
    write_reset_plan(build_reset_plan([], {}, "error"), d)  # rewritten whole
    assert sorted(p.name for p in (tmp_path / "plan").iterdir()) == ["README.md", "plan.json"]


def test_the_audit_writes_the_plan_and_the_plan_command_makes_it_again(scenario_latest, tmp_path, capsys):
    _, out = scenario_latest
    summary = json.loads((out / "summary.json").read_text())
    assert summary["reset_plan"]["groups"] >= 1 and summary["reset_plan"]["dir"] == "reset_plan"
    written = json.loads((out / "reset_plan" / "plan.json").read_text())
    assert main(["plan", "--output", str(out), "--to", str(tmp_path / "again")]) == 0
    assert json.loads((tmp_path / "again" / "plan.json").read_text()) == written
    assert "group(s)" in capsys.readouterr().out
    # the bundled scenario's truncations are answered at their divergence offsets
    inputs = read_plan_inputs(str(out))
    truncated = {
        (f["group_id"], f["topic"], f["partition"]): f["divergence_offset"]
        for f in inputs["findings"]
        if f["finding"] == "LOG_TRUNCATION"
    }
    rows = {(g["group_id"], r["topic"], r["partition"]): r for g in written["groups"] for r in g["rows"]}
    assert truncated and all(rows[k]["reset_to"] == d for k, d in truncated.items())


def test_the_reports_first_actions_link_each_group_to_its_plan(spark, scenario_latest, tmp_path):
    import shutil

    from audit.report.html import write_html_report

    _, out = scenario_latest
    copy = tmp_path / "out"
    shutil.copytree(out, copy)
    page = open(write_html_report(spark, str(copy)), encoding="utf-8").read()
    plan = json.loads((copy / "reset_plan" / "plan.json").read_text())
    files = [g["file"] for g in plan["groups"]]
    assert any(f'href="reset_plan/{f}"' in page for f in files)
    assert 'href="reset_plan/README.md"' in page and f"Reset plans for {len(files)} group(s)" in page
