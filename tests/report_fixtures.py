"""Small fake audit output directories for the report and expectations tests.

The rows follow the ``unclean-election-3brokers`` scenario (see
``shared/data/scenarios/unclean-election-3brokers/STORY.md``): an unclean
election of ``dev.payments`` leaves ``dev-settlement`` past the divergence
points (payments-0 at 60, payments-1 at 50), a buggy client commits
``dev.inventory-2`` 78@0 past the end of epoch 0 (50), ``dev-archiver`` sits
below the log start of ``dev.audit-0`` after delete-records, and so on.

Two variants are offered:

* ``with_truncation=True``: the scenario as the auditor should judge it, with
  three ``critical`` ``LOG_TRUNCATION`` findings.
* ``with_truncation=False`` ("clean"): the same cluster, but the groups that
  were past a divergence point committed safe offsets instead, so only
  error/warning/info findings remain.

Everything is written with Spark in the layout of the audit's output contract
(``findings/``, ``committed_offsets/``, ``epochs/``, ``bounds/``, optionally
``commits/``, and ``summary.json``).  The helpers return plain Python rows so a
test can tweak them (add a critical finding, an epoch of -2, ...) before
writing.
"""

from __future__ import annotations

import copy
import datetime as dt
import json
import os
from typing import Any, Callable, Dict, List, Optional

from pyspark.sql import SparkSession

from audit.groups import group_status
from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    IntegerType,
    LongType,
    ShortType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

Row = Dict[str, Any]
Tables = Dict[str, List[Row]]

FINDINGS_SCHEMA = StructType(
    [
        StructField("group_id", StringType(), False),
        StructField("topic", StringType(), False),
        StructField("partition", IntegerType(), False),
        StructField("finding", StringType(), False),
        StructField("severity", StringType(), False),
        StructField("committed_offset", LongType(), True),
        StructField("committed_leader_epoch", IntegerType(), True),
        StructField("commit_timestamp", TimestampType(), True),
        StructField("divergence_offset", LongType(), True),
        StructField("records_at_risk", LongType(), True),
        StructField("epoch_end_offset", LongType(), True),
        StructField("log_start_offset", LongType(), True),
        StructField("log_end_offset", LongType(), True),
        StructField("previous_offset", LongType(), True),
        StructField("previous_leader_epoch", IntegerType(), True),
        StructField("answered_by_broker", IntegerType(), True),
        StructField("detail", StringType(), True),
        StructField("cause", StringType(), True),
        StructField("cause_leader_epoch", IntegerType(), True),
        StructField("cause_leader", IntegerType(), True),
        StructField("cause_time", TimestampType(), True),
        StructField("replica_broker", IntegerType(), True),
        StructField("groups_consumed", ArrayType(StringType()), True),
        StructField("offset_at_expansion", LongType(), True),
        StructField("expansion_partition", IntegerType(), True),
    ]
)

_COMMIT_FIELDS = [
    StructField("group_id", StringType(), False),
    StructField("topic", StringType(), False),
    StructField("partition", IntegerType(), False),
    StructField("committed_offset", LongType(), True),
    StructField("committed_leader_epoch", IntegerType(), True),
    StructField("metadata", StringType(), True),
    StructField("commit_timestamp", TimestampType(), True),
    StructField("value_version", ShortType(), True),
]

COMMITTED_OFFSETS_SCHEMA = StructType(
    _COMMIT_FIELDS
    + [
        StructField("verdict", StringType(), False),
        StructField("log_start_offset", LongType(), True),
        StructField("local_log_start_offset", LongType(), True),
        StructField("log_end_offset", LongType(), True),
        StructField("high_watermark", LongType(), True),
        StructField("lag", LongType(), True),
        StructField("resume_tier", StringType(), True),
        StructField("records_at_risk", LongType(), True),
    ]
)

COMMITS_SCHEMA = StructType(
    _COMMIT_FIELDS
    + [
        StructField("source_partition", IntegerType(), True),
        StructField("source_offset", LongType(), True),
    ]
)

EPOCHS_SCHEMA = StructType(
    [
        StructField("topic", StringType(), False),
        StructField("partition", IntegerType(), False),
        StructField("broker_id", IntegerType(), False),
        StructField("leader_epoch", IntegerType(), False),
        StructField("start_offset", LongType(), False),
        StructField("is_leader", BooleanType(), False),
    ]
)

BOUNDS_SCHEMA = StructType(
    [
        StructField("topic", StringType(), False),
        StructField("partition", IntegerType(), False),
        StructField("log_start_offset", LongType(), True),
        StructField("local_log_start_offset", LongType(), True),
        StructField("log_end_offset", LongType(), True),
        StructField("high_watermark", LongType(), True),
        StructField("leader_id", IntegerType(), True),
    ]
)

SCHEMAS = {
    "findings": FINDINGS_SCHEMA,
    "committed_offsets": COMMITTED_OFFSETS_SCHEMA,
    "commits": COMMITS_SCHEMA,
    "epochs": EPOCHS_SCHEMA,
    "bounds": BOUNDS_SCHEMA,
}

SEVERITY_OF = {
    "LOG_TRUNCATION": "critical",
    "OFFSET_OUT_OF_RANGE": "error",
    "BEHIND_METADATA_EPOCH": "error",
    "UNKNOWN_LEADER_EPOCH": "error",
    "OFFSET_REWIND": "warning",
    "EPOCH_UNVERIFIABLE": "info",
}


def _ts(hms: str) -> dt.datetime:
    """A timestamp on the scenario's day (2026-11-22), naive UTC."""
    h, m, s = (int(x) for x in hms.split(":"))
    return dt.datetime(2026, 11, 22, h, m, s)


# (topic, partition) -> (log_start, log_end, high_watermark, leader)
_BOUNDS = {
    ("dev.payments", 0): (0, 110, 110, 1),
    ("dev.payments", 1): (0, 60, 60, 1),
    ("dev.inventory", 0): (0, 110, 110, 2),
    ("dev.inventory", 1): (0, 80, 80, 3),
    ("dev.inventory", 2): (0, 80, 80, 1),
    ("dev.audit", 0): (50, 90, 90, 3),
    ("dev.clicks", 0): (0, 50, 50, 1),
    ("dev.clicks", 1): (0, 40, 40, 2),
    ("dev.clicks", 2): (0, 14, 14, 3),
    ("dev.clicks", 3): (0, 11, 11, 1),
    ("dev.ingest", 0): (0, 60, 60, 3),
}

# (topic, partition) -> {broker: [(epoch, start_offset), ...]}; the leader's
# cache is the one of _BOUNDS' leader.
_EPOCHS = {
    ("dev.payments", 0): {1: [(0, 0), (2, 60), (3, 110)], 2: [(0, 0), (2, 60)]},
    ("dev.payments", 1): {1: [(0, 0), (2, 50), (3, 60)], 2: [(0, 0), (2, 50)]},
    ("dev.inventory", 0): {b: [(0, 0), (1, 50), (2, 80)] for b in (1, 2, 3)},
    ("dev.inventory", 1): {b: [(0, 0)] for b in (1, 2, 3)},
    ("dev.inventory", 2): {b: [(0, 0), (2, 50)] for b in (1, 2, 3)},
    ("dev.audit", 0): {b: [(0, 50)] for b in (1, 2, 3)},
    ("dev.clicks", 0): {b: [(0, 0), (2, 30)] for b in (1, 2, 3)},
    ("dev.clicks", 1): {b: [(0, 0), (2, 25)] for b in (1, 2, 3)},
    ("dev.clicks", 2): {b: [(0, 0)] for b in (1, 2, 3)},
    ("dev.clicks", 3): {b: [(0, 0)] for b in (1, 2, 3)},
    ("dev.ingest", 0): {b: [(0, 0)] for b in (1, 2, 3)},
}

# Latest commits: (group, topic, partition, offset, epoch, time, value_version, metadata)
_LATEST_COMMON = [
    ("dev-archiver", "dev.audit", 0, 30, 0, "07:14:15", 3, ""),
    ("dev-auditor-ok", "dev.audit", 0, 70, 0, "07:15:19", 3, ""),
    ("dev-clicks-legacy", "dev.clicks", 0, 20, 0, "07:14:15", 3, ""),
    ("dev-clicks-legacy", "dev.clicks", 1, 15, 0, "07:14:15", 3, ""),
    ("dev-clickstream", "dev.clicks", 0, 40, 2, "07:15:22", 3, ""),
    ("dev-clickstream", "dev.clicks", 1, 30, 2, "07:15:22", 3, ""),
    ("dev-clickstream", "dev.clicks", 2, 12, 0, "07:15:22", 3, ""),
    ("dev-clickstream", "dev.clicks", 3, 9, 0, "07:15:22", 3, ""),
    ("dev-etl-txn", "dev.ingest", 0, 30, 0, "07:14:15", 3, ""),
    ("dev-inventory-sync", "dev.inventory", 0, 61, 1, "07:15:13", 3, ""),
    ("dev-inventory-watch", "dev.inventory", 0, 45, 0, "07:14:15", 3, ""),
    ("dev-inventory-watch", "dev.inventory", 2, 60, 2, "07:15:14", 3, ""),
    ("dev-ledger-boundary", "dev.payments", 0, 60, 0, "07:14:15", 3, ""),
    ("dev-ledger-boundary", "dev.payments", 1, 50, 0, "07:14:15", 3, ""),
    ("dev-ledger-lag", "dev.payments", 0, 35, 0, "07:14:15", 3, ""),
    ("dev-ledger-lag", "dev.payments", 1, 20, 0, "07:14:15", 3, ""),
    ("dev-reconciler", "dev.payments", 0, 105, 2, "07:15:00", 3, ""),
    ("dev-replay-tool", "dev.inventory", 0, 12, -1, "07:14:38", 1, ""),
    ("dev-replay-tool", "dev.inventory", 1, 12, -1, "07:14:38", 1, ""),
    ("dev-replay-tool", "dev.inventory", 2, 12, -1, "07:14:38", 1, ""),
    ("dev-replay-tool", "dev.payments", 0, 70, -1, "07:14:38", 1, ""),
    ("dev-replay-tool", "dev.payments", 1, 75, -1, "07:14:38", 1, ""),
    ("dev-rewinder", "dev.inventory", 1, 32, 0, "07:15:12", 3, ""),
]

_LATEST_TRUNCATED = [
    ("dev-inventory-sync", "dev.inventory", 2, 78, 0, "07:15:14", 3, "kafka-python explicit"),
    ("dev-settlement", "dev.payments", 0, 100, 0, "07:14:38", 3, ""),
    ("dev-settlement", "dev.payments", 1, 90, 0, "07:14:38", 3, ""),
]

_LATEST_CLEAN = [
    ("dev-inventory-sync", "dev.inventory", 2, 75, 2, "07:15:13", 3, ""),
    ("dev-settlement", "dev.payments", 0, 55, 0, "07:14:38", 3, ""),
    ("dev-settlement", "dev.payments", 1, 45, 0, "07:14:38", 3, ""),
]


def _finding(
    group: str,
    topic: str,
    partition: int,
    finding: str,
    offset: int,
    epoch: int,
    when: str,
    detail: str,
    *,
    divergence: Optional[int] = None,
    epoch_end: Optional[int] = None,
    previous: Optional[tuple] = None,
    broker: Optional[int] = None,
    cause: Optional[tuple] = None,
) -> Row:
    start, end, _hw, leader = _BOUNDS[(topic, partition)]
    return {
        "group_id": group,
        "topic": topic,
        "partition": partition,
        "finding": finding,
        "severity": SEVERITY_OF[finding],
        "committed_offset": offset,
        "committed_leader_epoch": epoch,
        "commit_timestamp": _ts(when),
        "divergence_offset": divergence,
        "records_at_risk": (offset - divergence) if divergence is not None else None,
        "epoch_end_offset": epoch_end,
        "log_start_offset": start,
        "log_end_offset": end,
        "previous_offset": previous[0] if previous else None,
        "previous_leader_epoch": previous[1] if previous else None,
        "answered_by_broker": broker if broker is not None else (leader if epoch_end is not None else None),
        "detail": detail,
        "cause": cause[0] if cause else None,
        "cause_leader_epoch": cause[1] if cause else None,
        "cause_leader": cause[2] if cause else None,
        "cause_time": _ts(cause[3]) if cause and cause[3] else None,
        "replica_broker": None,
        "groups_consumed": None,
        "offset_at_expansion": None,
        "expansion_partition": None,
    }


def _truncation_detail(group: str, tp: str, offset: int, epoch: int, div: int, why: str) -> str:
    return (
        f"{group} committed {tp} at offset {offset} with leader epoch {epoch}, but the leader's "
        f"epoch {epoch} ends at {div}: the {offset - div} records between {div} and {offset} are "
        f"not the ones the group consumed ({why}). Risk: silent loss of the new records, or "
        f"duplicates on replay. Action: kafka-consumer-groups --reset-offsets --to-offset {div} "
        f"--group {group} --topic {tp.rsplit('-', 1)[0]}:{tp.rsplit('-', 1)[1]}, then reconcile."
    )


def _findings(with_truncation: bool) -> List[Row]:
    rows = [
        _finding(
            "dev-archiver",
            "dev.audit",
            0,
            "OFFSET_OUT_OF_RANGE",
            30,
            0,
            "07:14:15",
            "dev-archiver committed dev.audit-0 at 30, below the log start offset 50 (distance 20): "
            "records 30..49 were deleted before the group read them. Risk: loss of 20 records; the "
            "consumer will reset per auto.offset.reset. Action: check the retention/delete-records "
            "and reset to 50 deliberately.",
            epoch_end=90,
        ),
        _finding(
            "dev-replay-tool",
            "dev.payments",
            1,
            "OFFSET_OUT_OF_RANGE",
            75,
            -1,
            "07:14:38",
            "dev-replay-tool committed dev.payments-1 at 75, above the log end offset 60 (distance "
            "15; negative lag). Risk: the consumer resets and may skip or replay records. Action: "
            "kafka-consumer-groups --reset-offsets --to-offset 60.",
        ),
        _finding(
            "dev-inventory-sync",
            "dev.inventory",
            0,
            "BEHIND_METADATA_EPOCH",
            61,
            1,
            "07:15:13",
            "dev-inventory-sync committed dev.inventory-0 61@1 after 95@2: the committer's leader "
            "epoch went backwards (a seek or a stale client). Risk: replay of 34 records. Action: "
            "find the client that committed with epoch 1 and confirm the seek was intended.",
            previous=(95, 2),
        ),
        _finding(
            "dev-inventory-sync",
            "dev.inventory",
            0,
            "OFFSET_REWIND",
            61,
            1,
            "07:15:13",
            "dev-inventory-sync moved dev.inventory-0 back from 95 to 61. Risk: 34 records are "
            "processed twice. Action: confirm the rewind was intended.",
            previous=(95, 2),
        ),
        _finding(
            "dev-rewinder",
            "dev.inventory",
            1,
            "OFFSET_REWIND",
            32,
            0,
            "07:15:12",
            "dev-rewinder moved dev.inventory-1 back from 70 to 32. Risk: 38 records are processed "
            "twice. Action: confirm the seek was intended.",
            previous=(70, 0),
        ),
    ]
    for topic, partition, o in (
        ("dev.inventory", 0, 12),
        ("dev.inventory", 1, 12),
        ("dev.inventory", 2, 12),
        ("dev.payments", 0, 70),
        ("dev.payments", 1, 75),
    ):
        rows.append(
            _finding(
                "dev-replay-tool",
                topic,
                partition,
                "EPOCH_UNVERIFIABLE",
                o,
                -1,
                "07:14:38",
                f"dev-replay-tool committed {topic}-{partition} at {o} without a leader epoch (-1, "
                "value v1): no client can check it for truncation. Risk: a truncation would go "
                "unnoticed. Action: commit with a leader epoch (KIP-320 capable client/tool).",
            )
        )
    if with_truncation:
        rows += [
            _finding(
                "dev-settlement",
                "dev.payments",
                0,
                "LOG_TRUNCATION",
                100,
                0,
                "07:14:38",
                _truncation_detail(
                    "dev-settlement", "dev.payments-0", 100, 0, 60, "unclean election: leader_recovery_state RECOVERING"
                ),
                divergence=60,
                epoch_end=60,
                broker=1,
                cause=("unclean_election", 2, 2, "07:14:55"),
            ),
            _finding(
                "dev-settlement",
                "dev.payments",
                1,
                "LOG_TRUNCATION",
                90,
                0,
                "07:14:38",
                _truncation_detail(
                    "dev-settlement", "dev.payments-1", 90, 0, 50, "unclean election: leader_recovery_state RECOVERING"
                ),
                divergence=50,
                epoch_end=50,
                broker=1,
                cause=("unclean_election", 2, 2, "07:14:57"),
            ),
            _finding(
                "dev-inventory-sync",
                "dev.inventory",
                2,
                "LOG_TRUNCATION",
                78,
                0,
                "07:15:14",
                _truncation_detail(
                    "dev-inventory-sync",
                    "dev.inventory-2",
                    78,
                    0,
                    50,
                    "stale client epoch: no data lost, but the consumer rewinds",
                ),
                divergence=50,
                epoch_end=50,
                broker=1,
                cause=("stale_client_epoch", None, None, None),
            ),
            _finding(
                "dev-inventory-sync",
                "dev.inventory",
                2,
                "BEHIND_METADATA_EPOCH",
                78,
                0,
                "07:15:14",
                "dev-inventory-sync committed dev.inventory-2 78@0 after 75@2: a forward move with "
                "an older epoch (stale or zombie client). Risk: the consumer will see a truncation "
                "and replay from 50. Action: stop the client committing with epoch 0.",
                previous=(75, 2),
            ),
        ]
    return rows


_RANK = {"critical": 0, "error": 1, "warning": 2, "info": 3}


def _committed(latest: List[tuple], findings: List[Row]) -> List[Row]:
    worst: Dict[tuple, Row] = {}
    for f in findings:
        key = (f["group_id"], f["topic"], f["partition"])
        if key not in worst or _RANK[f["severity"]] < _RANK[worst[key]["severity"]]:
            worst[key] = f
    rows = []
    for g, t, p, off, ep, when, vv, meta in latest:
        f = worst.get((g, t, p))
        start, end, hw, _ = _BOUNDS.get((t, p), (None, None, None, None))
        rows.append(
            {
                "group_id": g,
                "topic": t,
                "partition": p,
                "committed_offset": off,
                "committed_leader_epoch": ep,
                "metadata": meta,
                "commit_timestamp": _ts(when),
                "value_version": vv,
                "verdict": f["finding"] if f else "OK",
                "log_start_offset": start,
                "local_log_start_offset": start,
                "log_end_offset": end,
                "high_watermark": hw,
                "lag": None if end is None else end - off,
                "resume_tier": None if end is None or not start <= off <= end else "local",
                "records_at_risk": f.get("records_at_risk") if f else None,
            }
        )
    return rows


def _commits(latest: List[Row]) -> List[Row]:
    """History rows: every latest commit plus a few earlier ones."""
    earlier = [
        ("dev-inventory-sync", "dev.inventory", 0, 40, 0, "07:14:15"),
        ("dev-inventory-sync", "dev.inventory", 0, 95, 2, "07:15:12"),
        ("dev-inventory-sync", "dev.inventory", 2, 75, 2, "07:15:13"),
        ("dev-rewinder", "dev.inventory", 1, 45, 0, "07:14:15"),
        ("dev-rewinder", "dev.inventory", 1, 70, 0, "07:15:11"),
    ]
    rows = []
    pos = 0
    for g, t, p, off, ep, when in earlier:
        rows.append(
            {
                "group_id": g,
                "topic": t,
                "partition": p,
                "committed_offset": off,
                "committed_leader_epoch": ep,
                "metadata": "",
                "commit_timestamp": _ts(when),
                "value_version": 3,
                "source_partition": 5,
                "source_offset": pos,
            }
        )
        pos += 1
    for r in latest:
        row = {k: v for k, v in r.items() if k != "verdict"}
        row["source_partition"] = 5
        row["source_offset"] = pos
        pos += 1
        rows.append(row)
    return rows


def _epochs() -> List[Row]:
    rows = []
    for (topic, partition), caches in _EPOCHS.items():
        leader = _BOUNDS[(topic, partition)][3]
        for broker, entries in sorted(caches.items()):
            for epoch, start in entries:
                rows.append(
                    {
                        "topic": topic,
                        "partition": partition,
                        "broker_id": broker,
                        "leader_epoch": epoch,
                        "start_offset": start,
                        "is_leader": broker == leader,
                    }
                )
    return rows


def _bounds() -> List[Row]:
    return [
        {
            "topic": t,
            "partition": p,
            "log_start_offset": s,
            "local_log_start_offset": s,
            "log_end_offset": e,
            "high_watermark": hw,
            "leader_id": leader,
        }
        for (t, p), (s, e, hw, leader) in _BOUNDS.items()
    ]


def scenario_tables(with_truncation: bool = True, with_history: bool = False) -> Tables:
    """Python rows of every contract table for the scenario.

    Returns a dict ``{"findings", "committed_offsets", "epochs", "bounds"}`` (plus
    ``"commits"`` when ``with_history``) of lists of row dicts whose keys are the
    contract's column names.  The lists are fresh copies: mutate them freely.
    """
    findings = _findings(with_truncation)
    latest = _LATEST_COMMON + (_LATEST_TRUNCATED if with_truncation else _LATEST_CLEAN)
    committed = _committed(latest, findings)
    tables: Tables = {
        "findings": findings,
        "committed_offsets": committed,
        "epochs": _epochs(),
        "bounds": _bounds(),
    }
    if with_history:
        tables["commits"] = _commits(committed)
    return copy.deepcopy(tables)


def summary_for(tables: Tables, elapsed: float = 3.25) -> Dict[str, Any]:
    """A ``summary.json`` document consistent with ``tables``."""
    by_name: Dict[str, int] = {}
    by_sev: Dict[str, int] = {}
    for f in tables["findings"]:
        by_name[f["finding"]] = by_name.get(f["finding"], 0) + 1
        by_sev[f["severity"]] = by_sev.get(f["severity"], 0) + 1
    by_version: Dict[str, int] = {}
    for c in tables.get("commits", tables["committed_offsets"]):
        key = str(c["value_version"])
        by_version[key] = by_version.get(key, 0) + 1
    commits = sum(by_version.values())
    return {
        "inputs": {
            "brokers_dir": "shared/data/scenarios/unclean-election-3brokers/brokers",
            "mode": "history" if "commits" in tables else "latest",
        },
        "records_read": {
            "by_record_type": {"offset_commit": commits + 2, "group_metadata": 6, "control": 3},
            "by_value_version": by_version,
        },
        "records_skipped": {
            "by_reason": {"aborted_transaction": 2, "corrupt_batch": 1},
            "where": [
                {
                    "file": "broker-1/__consumer_offsets-7/00000000000000000000.log",
                    "position": 4096,
                    "reason": "corrupt_batch",
                }
            ],
        },
        "findings": {"by_name": by_name, "by_severity": by_sev},
        "elapsed_seconds": elapsed,
    }


def write_output(
    spark: SparkSession,
    out_dir: str,
    tables: Tables,
    summary: Optional[Dict[str, Any]] = None,
) -> str:
    """Write ``tables`` (as returned by :func:`scenario_tables`) as Parquet under ``out_dir``.

    Each table goes to ``<out_dir>/<name>/`` with the contract's schema (one file
    per table), and ``summary`` (default: :func:`summary_for`) to
    ``<out_dir>/summary.json``.  Returns ``out_dir``.
    """
    os.makedirs(out_dir, exist_ok=True)
    for name, rows in tables.items():
        schema = SCHEMAS[name]
        data = [tuple(r.get(f.name) for f in schema.fields) for r in rows]
        df = spark.createDataFrame(data, schema=schema)
        df.coalesce(1).write.mode("overwrite").parquet(os.path.join(out_dir, name))
    if "groups" not in tables and {"committed_offsets", "findings"} <= set(tables):
        # every audit writes groups/: derive it the way the pipeline does, from the tables just written
        groups = group_status(
            spark,
            spark.read.parquet(os.path.join(out_dir, "committed_offsets")),
            spark.read.parquet(os.path.join(out_dir, "findings")),
            None,
        )
        groups.coalesce(1).write.mode("overwrite").parquet(os.path.join(out_dir, "groups"))
    with open(os.path.join(out_dir, "summary.json"), "w", encoding="utf-8") as fh:
        json.dump(summary if summary is not None else summary_for(tables), fh, indent=2)
    return out_dir


def write_fake_output(
    spark: SparkSession,
    out_dir: str,
    *,
    with_truncation: bool = True,
    with_history: bool = False,
    mutate: Optional[Callable[[Tables], None]] = None,
) -> str:
    """Build the scenario tables, let ``mutate`` edit them in place, write them, return ``out_dir``."""
    tables = scenario_tables(with_truncation=with_truncation, with_history=with_history)
    if mutate is not None:
        mutate(tables)
    return write_output(spark, out_dir, tables)
