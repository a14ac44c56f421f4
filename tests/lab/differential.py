"""The checker: the audit's verdict for every judged group-partition against Kafka's consumer.

Agreement, per group-partition the oracle judged (``LabClient`` ``verdicts``):

* ``NoOffsetForPartitionException`` — the audit has no live commit for it (no row in ``committed_offsets/``).
* otherwise the audit's committed offset and leader epoch equal what the consumer resumed from, and
  * ``LogTruncationException`` — the audit's verdict is ``LOG_TRUNCATION`` with ``divergence_offset`` equal to
    the consumer's ``divergentOffsets()`` offset;
  * ``OffsetOutOfRangeException`` — the verdict is ``OFFSET_OUT_OF_RANGE``;
  * ``OK`` — no ``LOG_TRUNCATION`` and no ``OFFSET_OUT_OF_RANGE`` finding (other findings, e.g. a rewind or an
    unverifiable epoch, do not contradict a consumer that resumes fine);
  * ``NO_VERDICT`` (the consumer neither fetched nor failed: it waits for metadata with the committed epoch,
    which no broker has) — the audit says ``UNKNOWN_LEADER_EPOCH``.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq

TRUNC, OOR = "LOG_TRUNCATION", "OFFSET_OUT_OF_RANGE"


def read_output(out: Path) -> tuple[dict, dict]:
    """``(committed, findings)`` keyed by ``(group, topic, partition)`` from an audit output directory."""
    committed = {}
    for r in pq.read_table(Path(out) / "committed_offsets").to_pylist():
        committed[(r["group_id"], r["topic"], r["partition"])] = r
    findings: dict = {}
    for r in pq.read_table(Path(out) / "findings").to_pylist():
        findings.setdefault((r["group_id"], r["topic"], r["partition"]), []).append(r)
    return committed, findings


def _log_starts(out: Path) -> dict:
    return {
        (r["topic"], r["partition"]): r["log_start_offset"]
        for r in pq.read_table(Path(out) / "bounds", columns=["topic", "partition", "log_start_offset"]).to_pylist()
    }


def truncation_causes(verdicts: list[dict], out: Path) -> dict[tuple, tuple]:
    """For every group-partition Kafka's consumer found truncated (``LogTruncationException``): the audit's
    LOG_TRUNCATION ``(cause, cause_leader_epoch, cause_leader)``, or None when the audit has no such finding.
    Keys: ``(group, topic, partition)``."""
    _committed, findings = read_output(out)
    res = {}
    for v in verdicts:
        if v["verdict"] != "LogTruncationException":
            continue
        key = (v["group"], v["topic"], v["partition"])
        fs = [f for f in findings.get(key, []) if f["finding"] == TRUNC]
        res[key] = (fs[0].get("cause"), fs[0].get("cause_leader_epoch"), fs[0].get("cause_leader")) if fs else None
    return res


def compare(verdicts: list[dict], out: Path, reference: Path | None = None) -> list[dict]:
    """One row per judged group-partition: oracle verdict, audit verdict, ``agree`` and ``why`` when not.

    ``reference``: for a copy taken while the cluster ran, the audit of the same cluster's log dirs after its
    clean shutdown. A ``OffsetOutOfRangeException`` below a log start offset that the copy's bytes do not hold
    yet (every replica's ``log-start-offset-checkpoint`` in the copy predates the ``deleteRecords``: the
    reference's log start is higher than the copy's, and the committed offset lies between them) is not a
    disagreement but ``documented``: the input cannot show it.
    """
    committed, findings = read_output(out)
    starts, ref_starts = (_log_starts(out), _log_starts(reference)) if reference else ({}, {})
    rows = []
    for v in verdicts:
        key = (v["group"], v["topic"], v["partition"])
        c, fs = committed.get(key), findings.get(key, [])
        names = {f["finding"] for f in fs}
        audit = c["verdict"] if c else "NO_COMMIT"
        oracle = v["verdict"]
        why = documented = None
        if oracle == "NoOffsetForPartitionException":
            if c is not None:
                why = f"audit has a live commit {c['committed_offset']}@{c['committed_leader_epoch']}"
        elif c is None:
            why = "audit has no live commit"
        elif (c["committed_offset"], c["committed_leader_epoch"]) != (v["committed_offset"], v["committed_epoch"]):
            why = (
                f"committed {c['committed_offset']}@{c['committed_leader_epoch']} but the consumer resumed from "
                f"{v['committed_offset']}@{v['committed_epoch']}"
            )
        elif oracle == "LogTruncationException":
            div = [f["divergence_offset"] for f in fs if f["finding"] == TRUNC]
            if audit != TRUNC:
                why = f"verdict {audit}, findings {sorted(names)}"
            elif div != [v["divergent_offset"]]:
                why = f"divergence_offset {div} != {v['divergent_offset']}"
        elif oracle == "OffsetOutOfRangeException":
            tp = (key[1], key[2])
            if audit != OOR and starts.get(tp, 0) <= c["committed_offset"] < ref_starts.get(tp, -1):
                documented = (
                    f"log start offset {ref_starts[tp]} not on disk in the copy (it shows "
                    f"{starts[tp]}): the brokers had not checkpointed it yet"
                )
            elif audit != OOR:
                why = f"verdict {audit}, findings {sorted(names)}"
        elif oracle == "OK":
            if names & {TRUNC, OOR}:
                why = f"findings {sorted(names)}"
        elif oracle == "NO_VERDICT":
            if audit != "UNKNOWN_LEADER_EPOCH":
                why = f"verdict {audit}"
        else:
            why = f"the oracle failed: {v.get('message')}"
        rows.append(
            {
                "group": key[0],
                "topic": key[1],
                "partition": key[2],
                "oracle": oracle,
                "divergent_offset": v.get("divergent_offset"),
                "audit": audit,
                "agree": why is None,
                "why": why,
                "documented": documented,
            }
        )
    return rows


def tally(rows: list[dict]) -> dict:
    """Counts per oracle verdict: judged, agreements, documented differences (counted apart from agreements)."""
    judged = Counter(r["oracle"] for r in rows)
    agree = Counter(r["oracle"] for r in rows if r["agree"] and not r.get("documented"))
    documented = Counter(r["oracle"] for r in rows if r.get("documented"))
    return {k: {"judged": judged[k], "agree": agree[k], "documented": documented[k]} for k in sorted(judged)}


def describe_disagreements(rows: list[dict], seed: int, version: str, source: str) -> str:
    bad = [r for r in rows if not r["agree"]]
    lines = [
        f"{len(bad)} disagreement(s) with Kafka's consumer, {source} audit, Kafka {version}; reproduce with "
        f"`python -m tests.lab.soak --versions {version} --seeds {seed}`:"
    ]
    lines += [
        f"  {r['group']} {r['topic']}-{r['partition']}: consumer {r['oracle']}"
        f"{'' if r['divergent_offset'] is None else ' @' + str(r['divergent_offset'])}, audit {r['audit']}: {r['why']}"
        for r in bad
    ]
    return "\n".join(lines)


def reader_agreement(spark, bootstrap: str, client) -> dict:
    """The live source's read of ``__consumer_offsets`` (the ``kafka_offsets_topic`` data source as the audit
    runs it: ``fetch`` engine, decoded) against Kafka's Java consumer reading the same topic (no group,
    ``read_committed``, from the beginning to the last stable offset; ``LabClient``'s ``read_topic``), on a
    cluster nobody writes to: ``{"kafka_records", "ours", "missing", "extra", "duplicates"}`` (the offsets
    Kafka returned that we did not, and the other way round, as ``[partition, offset]``, at most 20 each)."""
    from pyspark.sql import functions as F

    from audit.sources.kafka_datasource import register

    kafka = client.call("read_topic", topic="__consumer_offsets")
    theirs = {(int(p), int(o)) for p, offsets in kafka.items() for o in offsets}
    register(spark)
    rows = (
        spark.read.format("kafka_offsets_topic")
        .option("bootstrap.servers", bootstrap)
        .option("decoded", "true")
        .load()
        .where(F.col("kind") == "record")
        .select("source_partition", "offset")
        .collect()
    )
    ours = [(r.source_partition, r.offset) for r in rows]
    mine = set(ours)
    return {
        "kafka_records": len(theirs),
        "ours": len(ours),
        "missing": sorted(theirs - mine)[:20],
        "extra": sorted(mine - theirs)[:20],
        "duplicates": len(ours) - len(mine),
    }
