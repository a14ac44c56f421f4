"""Reset plans from findings: which offset answers which finding, which groups get none, Kafka's CSV as written,
and the plan the audit writes (the lab proves the plans with Kafka's own tool and consumer:
``tests/lab/test_lab_reset_plan.py``)."""

import json

from audit.cli import main
from audit.report.reset_plan import SHARE_OUT_OF_RANGE, build_reset_plan, read_plan_inputs, write_reset_plan


def _f(group, finding, committed, severity="error", topic="t", partition=0, divergence_offset=None, **more):
    return dict(
        group_id=group, topic=topic, partition=partition, finding=finding, severity=severity,
        committed_offset=committed, divergence_offset=divergence_offset, log_start_offset=10, log_end_offset=100,
        **more,
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
    findings = [_f(g, "OFFSET_OUT_OF_RANGE", 4) for g in ("live", "empty", "streams-g", "no-record")]
    groups = {
        "live": {"group_state": "Stable", "group_members": 2, "group_type": "classic"},
        "empty": {"group_state": "Empty", "group_members": 0, "group_type": "consumer"},
        "streams-g": {"group_state": "Empty", "group_members": 0, "group_type": "streams"},
    }
    plan = build_reset_plan(findings, groups, "error")
    assert [g.group_id for g in plan.groups] == ["empty", "no-record"]
    assert {g.tool for g in plan.groups} == {"kafka-consumer-groups"}
    assert "2 member(s) (state Stable)" in plan.no_plan["live"]
    assert "kafka-streams-application-reset" in plan.no_plan["streams-g"]
    assert build_reset_plan(findings, groups, "critical").groups == []  # error findings are below the gate


def _share(group, finding, start_offset, divergence_offset=None, state="Empty", partition=0, at_risk=None):
    """A share group's finding as the audit writes it: ``committed_offset`` is the share-partition start offset,
    ``group_type``/``group_state`` come from ``__consumer_offsets`` (share groups have no ``groups/`` row)."""
    severity = "critical" if finding == "LOG_TRUNCATION" else "error"
    return _f(
        group, finding, start_offset, severity, partition=partition, divergence_offset=divergence_offset,
        group_type="share", group_state=state, records_at_risk=at_risk,
    )  # fmt: skip


def test_a_share_groups_truncation_is_reset_to_the_divergence_offset_with_kafka_share_groups(tmp_path):
    findings = [
        _share("sg", "LOG_TRUNCATION", 80, divergence_offset=60, at_risk=25),  # SPSO 80 past D 60
        _share("sg", "LOG_TRUNCATION", 40, divergence_offset=60, partition=1, at_risk=7),  # SPSO below D
        _share("sg", "LOG_TRUNCATION", 0, divergence_offset=60, partition=2, at_risk=9),  # an old state's SPSO
    ]
    # the share-partitions' newest states: partition 2's group has gone on past D since
    newest = {("sg", "t", 2): 75, ("other", "t", 0): 3}
    plan = build_reset_plan(findings, {}, "error", share_start_offsets=newest)
    (g,) = plan.groups
    assert g.tool == "kafka-share-groups" and plan.no_plan == {} and plan.not_reset == {}
    got = {(r.partition, r.committed_offset, r.reset_to, r.rule, r.records) for r in g.rows}
    assert got == {
        (0, 80, 60, "the divergence offset", 25),  # records: the finding's records_at_risk
        (1, 40, 40, "the share-partition start offset", 7),  # not forward past records it has not finished
        (2, 75, 60, "the divergence offset", 9),  # its newest start offset is past D
    }
    assert "never deliver" in g.rows[0].effect
    cmds = g.commands()
    assert cmds["dry_run"] == (
        "kafka-share-groups --bootstrap-server BOOTSTRAP --command-config CLIENT.properties --reset-offsets "
        "--group sg --from-file sg.csv --dry-run"
    )
    assert cmds["execute"].startswith("kafka-share-groups ") and cmds["execute"].endswith(" --execute")
    write_reset_plan(plan, str(tmp_path / "plan"))
    assert (tmp_path / "plan" / "sg.csv").read_text() == "t,0,60\nt,1,40\nt,2,60\n"  # what kafka-share-groups takes
    doc = json.loads((tmp_path / "plan" / "plan.json").read_text())
    assert doc["groups"][0]["tool"] == "kafka-share-groups"
    readme = (tmp_path / "plan" / "README.md").read_text()
    assert "kafka-share-groups --bootstrap-server" in readme and "Kafka 4.4" in readme
    # without records_at_risk (an older output): the offsets between the start offset and the reset
    (row,) = build_reset_plan([_share("sg", "LOG_TRUNCATION", 80, 60)], {}, "error").groups[0].rows
    assert (row.reset_to, row.records) == (60, 20)


def test_a_share_groups_out_of_range_gets_no_reset_and_the_plan_says_so(tmp_path):
    findings = [
        _share("sg", "OFFSET_OUT_OF_RANGE", 4),  # SPSO below the log start 10: Kafka moves it itself
        _f("cg", "OFFSET_OUT_OF_RANGE", 4),  # a consumer group's: reset to the log start
    ]
    plan = build_reset_plan(findings, {}, "error")
    assert [(g.group_id, g.tool, [r.reset_to for r in g.rows]) for g in plan.groups] == [
        ("cg", "kafka-consumer-groups", [10])
    ]
    assert plan.not_reset == {SHARE_OUT_OF_RANGE: 1} and plan.no_plan == {}
    write_reset_plan(plan, str(tmp_path / "plan"))
    assert f"- {SHARE_OUT_OF_RANGE}: 1" in (tmp_path / "plan" / "README.md").read_text()
    # a truncation on another partition of the same group is still planned
    both = build_reset_plan([*findings, _share("sg", "LOG_TRUNCATION", 80, 60, partition=1)], {}, "error")
    assert [(g.group_id, [(r.partition, r.reset_to) for r in g.rows]) for g in both.groups] == [
        ("cg", [(0, 10)]),
        ("sg", [(1, 60)]),
    ]


def test_read_plan_inputs_gives_share_findings_their_type_state_and_newest_start_offset(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    def write(name, rows):
        (tmp_path / name).mkdir()
        pq.write_table(pa.Table.from_pylist(rows), tmp_path / name / "part-0.parquet")

    write("findings", [_share("sg", "LOG_TRUNCATION", 0, 60, at_risk=9), _share("sg", "OFFSET_OUT_OF_RANGE", 4)])
    write("bounds", [{"topic": "t", "partition": 0, "high_watermark": 100}])
    write("share_partitions", [{"group_id": "sg", "topic": "t", "partition": 0, "start_offset": 75}])
    inputs = read_plan_inputs(str(tmp_path))
    assert inputs["share_start_offsets"] == {("sg", "t", 0): 75}
    assert {(f["group_type"], f["group_state"], f["records_at_risk"]) for f in inputs["findings"]} == {
        ("share", "Empty", 9),
        ("share", "Empty", None),
    }
    plan = build_reset_plan(fail_on="error", **inputs)
    assert [(r.committed_offset, r.reset_to) for r in plan.groups[0].rows] == [(75, 60)]
    assert plan.not_reset == {SHARE_OUT_OF_RANGE: 1}


def test_a_share_group_with_members_gets_no_plan_with_the_reason():
    findings = [
        _share("busy", "LOG_TRUNCATION", 80, 60, state="Stable"),  # its findings' group_state (no groups/ row)
        _share("counted", "LOG_TRUNCATION", 80, 60, state=None),
        _share("idle", "LOG_TRUNCATION", 80, 60),
    ]
    groups = {"counted": {"group_state": "Stable", "group_members": 3, "group_type": "share"}}
    plan = build_reset_plan(findings, groups, "error")
    assert [g.group_id for g in plan.groups] == ["idle"]
    assert "member(s) (state Stable)" in plan.no_plan["busy"] and "inactive group only" in plan.no_plan["busy"]
    assert "3 member(s) (state Stable)" in plan.no_plan["counted"]
    assert set(plan.no_plan) == {"busy", "counted"}


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
