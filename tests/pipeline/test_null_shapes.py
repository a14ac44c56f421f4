"""Every output consumer over every null the output contract allows (audit.tables), and real runs keep the contract.

A live cluster's ``epochs/`` holds the leader's current epoch with ``start_offset`` null; the report assumed a
number and a live audit with reports on died after judging (exit 1, no output).  These tests build tables from
the contract with hypothesis, nulls wherever a column is nullable, and run the report (report.html), the
expectation suite, the metrics, the console table and the history over them; and they check that the real
pipeline's tables, offline and live, have exactly the contract's columns and types and no null where the contract
says there is none (so the generated shapes cover what the sources produce).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import string

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from audit import tables as contract
from audit.tables import SEVERITY_RANK
from ..sources.test_recorded_live_source import live_run  # noqa: F401 - the recorded live cluster, replayed (a fixture)

FINDINGS = [
    "LOG_TRUNCATION",
    "BEHIND_METADATA_EPOCH",
    "UNKNOWN_LEADER_EPOCH",
    "OFFSET_OUT_OF_RANGE",
    "OFFSET_REWIND",
    "EPOCH_UNVERIFIABLE",
    "REPLICA_DIVERGENCE",
    "PARTITION_EXPANSION_ORDER",
]
SEVERITIES = list(SEVERITY_RANK)
CHOICES = {  # columns whose values a consumer maps through a fixed vocabulary
    "finding": FINDINGS,
    "severity": SEVERITIES,
    "previous_severity": SEVERITIES,
    "verdict": ["OK", *FINDINGS],
    "status": ["new", "persisted", "resolved"],
    "cause": ["unclean_election", "stale_client_epoch", "log_truncated"],
    "event": ["registered", "fenced", "unfenced", "controlled_shutdown"],
    "change": ["changed", "new", "gone"],
}
TOPICS = ["payments", "orders.v2"]
GROUPS = ["g1", "billing-consumers"]


def _value(col: contract.Column):
    """A strategy of non-null values of one contract column."""
    t = col.type
    if col.name in CHOICES:
        return st.sampled_from(CHOICES[col.name])
    if col.name == "topic":
        return st.sampled_from(TOPICS)
    if col.name == "group_id":
        return st.sampled_from(GROUPS)
    if col.name == "partition":
        return st.integers(0, 2)
    if t in ("bigint",):
        return st.integers(-1, 10_000)
    if t in ("int", "smallint", "tinyint"):
        return st.integers(-1, 7)
    if t == "boolean":
        return st.booleans()
    if t == "timestamp":
        return st.datetimes(dt.datetime(2020, 1, 1), dt.datetime(2030, 1, 1))
    if t == "string":
        return st.text(string.ascii_letters + " -._:", max_size=12)
    if t == "array<string>":
        return st.lists(st.sampled_from(GROUPS), max_size=2)
    if t == "array<int>":
        return st.lists(st.integers(0, 4), max_size=3)
    if t.startswith("array<struct<epoch"):
        return st.lists(
            st.fixed_dictionaries(
                {
                    "epoch": st.none() | st.integers(0, 7),
                    "started_at": st.none() | _value(contract.Column("t", "timestamp")),
                    "leader": st.none() | st.integers(-1, 4),
                    "unclean": st.none() | st.booleans(),
                }
            ),
            max_size=3,
        )
    raise AssertionError(f"no strategy for {col.name} {t}")


def _row(table: str, all_null: bool = False):
    cols = contract.TABLES[table]
    if all_null:
        return st.fixed_dictionaries({c.name: (st.none() if c.nullable else _value(c)) for c in cols})
    return st.fixed_dictionaries({c.name: ((st.none() | _value(c)) if c.nullable else _value(c)) for c in cols})


TABLES = list(contract.TABLES)  # every table of the output contract


def _tables(all_null: bool = False):
    return st.fixed_dictionaries({t: st.lists(_row(t, all_null), min_size=1, max_size=4) for t in TABLES})


def _summary(base: dict, rows: dict) -> dict:
    """The real run's summary.json with the generated findings' counts (what the consumers cross-check)."""
    s = json.loads(json.dumps(base, default=str))
    by_sev = {k: 0 for k in SEVERITIES}
    by_name, name_sev = {}, {}
    for f in rows["findings"]:
        by_sev[f["severity"]] += 1
        by_name[f["finding"]] = by_name.get(f["finding"], 0) + 1
        name_sev[(f["finding"], f["severity"])] = name_sev.get((f["finding"], f["severity"]), 0) + 1
    s["findings"] = {
        "total": len(rows["findings"]),
        "by_name": by_name,
        "by_severity": by_sev,
        "by_name_severity": [{"finding": k[0], "severity": k[1], "count": n} for k, n in name_sev.items()],
    }
    s["offset_commits"]["group_partitions"] = len(rows["committed_offsets"])
    s["history"] = {
        "dir": "h",
        "run_id": "r2",
        "previous_run_id": None,
        "previous_run_time": None,
        "new": 0,
        "persisted": 0,
        "resolved": 0,
    }
    return s


def _consume_all(spark, tmp, rows: dict, base_summary: dict) -> None:
    """Every output consumer over ``rows`` (table -> dicts): must not raise."""
    from audit.report.expectations import run_expectations
    from audit.report.history import append_run, finding_changes
    from audit.report.html import write_html_report
    from audit.report.metrics import build_registry, group_partition_rows, group_rows, lost_lineage_rows, render
    from audit.report.console import console_table

    out = tmp / "out"
    out.mkdir(parents=True, exist_ok=True)
    dfs = {}
    for name, rs in rows.items():
        schema = contract.struct(name)
        dfs[name] = spark.createDataFrame([tuple(r[f.name] for f in schema.fields) for r in rs], schema)
        dfs[name].coalesce(1).write.mode("overwrite").parquet(str(out / name))
    summary = _summary(base_summary, rows)
    (out / "summary.json").write_text(json.dumps(summary, default=str))

    # the report from the in-memory tables (as the audit passes them) and from the files
    page = write_html_report(spark, str(out), tables=dfs)
    assert os.path.getsize(page) > 1000
    write_html_report(spark, str(out))
    outcome = run_expectations(spark, str(out))
    assert outcome.statistics.get("evaluated_expectations"), outcome.statistics
    gp = group_partition_rows(
        dfs["committed_offsets"], dfs["findings"], dfs["bounds"], 100, dfs.get("share_partitions")
    )
    lost = lost_lineage_rows(dfs["findings"], 100)
    groups = group_rows(dfs["groups"], 100)
    text = render(build_registry(summary, gp, lost=lost, groups=groups)).decode()
    assert "kafka_offset_audit_run_success 1.0" in text and "kafka_offset_audit_group_status{" in text
    assert "GROUPS" in console_table(dfs["findings"], dfs["committed_offsets"], dfs["bounds"], groups=dfs["groups"])
    hist = tmp / "history"
    for run_id in ("r1", "r2"):
        changes, info = finding_changes(spark, str(hist), run_id, dfs["findings"])
        assert sum(info[k] for k in ("new", "persisted", "resolved")) == changes.count()
        append_run(
            spark, str(hist), run_id, dict(summary, started_at=base_summary["started_at"]), dfs["findings"], str(out)
        )


@pytest.fixture(scope="module")
def base_summary(scenario_latest):
    return scenario_latest[0].summary


def _worst_case() -> dict:
    """Two rows per table, every nullable column null, the others fixed values."""
    fixed = {
        "string": "x",
        "bigint": 5,
        "int": 1,
        "smallint": 3,
        "tinyint": 0,
        "boolean": True,
        "timestamp": dt.datetime(2026, 1, 1),
    }
    rows = {}
    for name in TABLES:
        rs = []
        for i in range(2):
            r = {}
            for c in contract.TABLES[name]:
                if c.nullable:
                    r[c.name] = None
                elif c.name in CHOICES:
                    r[c.name] = CHOICES[c.name][i]
                elif c.name == "topic":
                    r[c.name] = TOPICS[i]
                elif c.name == "partition":
                    r[c.name] = i
                else:
                    r[c.name] = fixed[c.type]
            rs.append(r)
        rows[name] = rs
    return rows


def test_every_consumer_handles_every_nullable_column_null(spark, tmp_path_factory, base_summary):
    _consume_all(spark, tmp_path_factory.mktemp("all-null"), _worst_case(), base_summary)


@settings(
    max_examples=int(os.environ.get("KOA_NULL_SHAPE_EXAMPLES", "4")),
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(rows=_tables())
def test_every_consumer_handles_every_null_the_contract_allows(spark, tmp_path_factory, base_summary, rows):
    _consume_all(spark, tmp_path_factory.mktemp("nulls"), rows, base_summary)


def _check_contract(spark, out, tables):
    from pyspark.sql import functions as F

    problems = []
    for name in tables:
        path = out / name
        if not path.exists():
            continue
        df = spark.read.parquet(str(path))
        want = contract.struct(name)
        got = [(f.name, f.dataType.simpleString()) for f in df.schema.fields]
        exp = [(f.name, f.dataType.simpleString()) for f in want.fields]
        if got != exp:
            problems.append((name, "columns", got, exp))
            continue
        non_null = [f.name for f in want.fields if not f.nullable]
        if non_null:
            row = df.select(*[F.sum(F.col(c).isNull().cast("int")).alias(c) for c in non_null]).first()
            bad = {c: row[c] for c in non_null if row[c]}
            if bad:
                problems.append((name, "nulls in non-null columns", bad))
    return problems


def test_offline_outputs_keep_the_contract(spark, scenario_history, scenario_latest):
    for _result, out in (scenario_history, scenario_latest):
        assert (out / "findings").exists() and (out / "epochs").exists()
        assert _check_contract(spark, out, contract.TABLES) == []


def test_live_outputs_keep_the_contract_and_the_leader_epoch_has_no_start(spark, live_run):
    _result, out = live_run
    assert _check_contract(spark, out, contract.TABLES) == []
    epochs = spark.read.parquet(str(out / "epochs")).collect()
    assert epochs and all(e.start_offset is None for e in epochs)  # the shape that crashed the report


def test_conform_gives_every_mode_one_schema(spark):
    df = spark.createDataFrame(
        [("t", 1, 2, 5, None, True)],
        "topic string, partition int, broker_id int, leader_epoch int, start_offset bigint, is_leader boolean",
    ).select("topic", "partition", "leader_epoch", "is_leader")
    got = contract.conform("epochs", df)
    assert [f.name for f in got.schema.fields] == [c.name for c in contract.TABLES["epochs"]]
    assert got.first().asDict() == {
        "topic": "t",
        "partition": 1,
        "broker_id": None,
        "leader_epoch": 5,
        "start_offset": None,
        "is_leader": True,
    }
    typed = contract.conform(
        "bounds", spark.createDataFrame([("t", 0, 3)], "topic string, partition int, replica_count int")
    )
    assert dict(typed.dtypes)["replica_count"] == "bigint"
