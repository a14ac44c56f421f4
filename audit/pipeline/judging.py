"""Stages decode and judge: the live commits in scope, the rules over them, and the judged tables.

:func:`decode` folds the source's records into live commits (:class:`Decoded`), :func:`in_scope` keeps those the
audit's ``--groups``/``--topics`` name, :func:`judge_and_write` judges them and writes ``findings/``,
``committed_offsets/`` and ``groups/`` once each (:class:`Judged`), :func:`context_tables` names the tables written
beside them.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from pyspark.sql import DataFrame, Observation, SparkSession
from pyspark.sql import functions as F

from ..commits import live_commits, with_transaction_state
from ..groups import group_status
from ..judge import judge, with_verdicts
from ..owners import group_tables, subscribed_topics, with_owners
from ..io.outputs import StagedOutput
from ..spark import checkpoint_on_first_use
from . import config
from .config import AuditConfig

__all__ = ["RECORD_COLUMNS", "Decoded", "Judged", "context_tables", "decode", "in_scope", "judge_and_write"]


#: the decoded columns the commit and summary stages read (file names stay in ``raw`` for issues)
RECORD_COLUMNS = [
    "source_partition",
    "kind",
    "offset",
    "timestamp",
    "is_transactional",
    "producer_id",
    "control_type",
    "record_type",
    "group_id",
    "topic",
    "partition",
    "is_tombstone",
    "value_version",
    "committed_offset",
    "leader_epoch",
    "metadata",
    "commit_timestamp",
    "topic_id",
    "decode_error",
    "broker_id",
    "record_count",
    "live_count",
    "group_generation",
    "group_protocol_type",
    "group_protocol",
    "group_members",
    "group_owners",
    "member_id",
]


def in_scope(commits, cfg: AuditConfig):
    """Keep the ``commits`` in the audit's scope.

    In scope: group ids and topic names that ``--groups``/``--topics`` match whole, less those
    ``--exclude-groups``/``--exclude-topics`` match whole (Java regular expressions, Spark's ``rlike``).
    """
    if cfg.groups:
        commits = commits.where(F.col("group_id").rlike(f"^(?:{cfg.groups})$"))
    if cfg.topics:
        commits = commits.where(F.col("topic").rlike(f"^(?:{cfg.topics})$"))
    if cfg.exclude_groups:
        commits = commits.where(~F.col("group_id").rlike(f"^(?:{cfg.exclude_groups})$"))
    if cfg.exclude_topics:
        commits = commits.where(~F.col("topic").rlike(f"^(?:{cfg.exclude_topics})$"))
    return commits


@dataclass
class Decoded:
    """The decode stage's result.

    ``raw``: every decoded record, read issue and control record
    (:data:`audit.formats.offsets.RAW_SCHEMA` with ``txn_state``; lazy, read again only by the summary);
    ``records``: its ``kind='record'`` rows (:data:`RECORD_COLUMNS`); ``commits``: the live commits in scope
    (:func:`audit.commits.live_commits`, materialised once); ``n_live``/``n_latest``: live commits and
    group-partitions; ``share_raw``: ``__share_group_state`` decoded (None when not read); ``share_topics``: the
    share groups' topics in scope (a live cluster) or None.
    """

    raw: DataFrame
    records: DataFrame
    commits: DataFrame
    n_live: int
    n_latest: int
    share_raw: DataFrame | None
    share_topics: list[str] | None


@dataclass
class Judged:
    """The judged tables, each written once and read back from the written files (no job).

    ``findings``, ``committed`` (``committed_offsets``), ``groups``, ``share_partitions`` (None without share
    groups), and the owner tables they were joined with (``group_state``, ``owners``:
    :func:`audit.owners.group_tables`).
    """

    findings: DataFrame
    committed: DataFrame
    groups: DataFrame
    share_partitions: DataFrame | None
    group_state: DataFrame
    owners: DataFrame


def _commit_counts() -> list:
    """Return the decode's counts: live commits, group-partitions (latest commits), rows of the commits table."""
    return [
        F.sum("live_count").alias("live"),
        F.count(F.when(F.col("is_latest"), 1)).alias("latest"),
        F.count(F.lit(1)).alias("rows"),
    ]


def decode(cfg: AuditConfig, src, tuning) -> Decoded:
    """Run stage ``decode``: the source's records, their transactions resolved, folded into live commits.

    One checkpoint, counted by an observation: 1 Spark job, plus whatever the source's read runs.
    """
    raw = with_transaction_state(src.read_offsets(), all_rows=True)
    records = raw.where(F.col("kind") == "record").select(*RECORD_COLUMNS, "txn_state")
    # counted while the checkpoint runs (an observation, not a job of its own)
    counts = Observation("commits")
    commits = (
        in_scope(live_commits(records, latest_only=cfg.mode == "latest"), cfg)
        .observe(counts, *_commit_counts())
        .localCheckpoint()
    )
    got = counts.get
    if not {"live", "latest", "rows"} <= set(got):  # Spark Connect may return no metrics for a checkpoint
        got = commits.agg(*_commit_counts()).first().asDict()
    n_live, n_latest, n_rows = (got[k] for k in ("live", "latest", "rows"))
    tuning.decide(int(n_rows))  # what the rest of the audit handles is known only now
    config.progress(cfg, f"decode: {int(n_live or 0)} live commits of {int(n_latest or 0)} group-partitions")
    # share groups (KIP-932): their state is read only where __consumer_offsets holds share group records (a live
    # cluster: no request for __share_group_state, nor an ACL denial, where no share group ever ran)
    share_raw = None
    if not cfg.bootstrap_servers or records.where(F.col("record_type").isin(10, 11, 14, 15)).limit(1).count():
        share_raw = src.read_share_state()
    # the share groups' topics named for a live cluster: only those in --groups/--topics scope (KIP-526)
    share_topics = (
        subscribed_topics(records, cfg.groups, cfg.topics, cfg.exclude_groups, cfg.exclude_topics)
        if share_raw is not None
        else None
    )
    return Decoded(raw, records, commits, int(n_live or 0), int(n_latest or 0), share_raw, share_topics)


def judge_and_write(
    cfg: AuditConfig, spark: SparkSession, d: Decoded, state, out: StagedOutput, started_at: str
) -> Judged:
    """Run stage ``judge``: the rules (:func:`audit.judge.judge`), joined with the groups' owners, as ``findings/``.

    Then ``committed_offsets/`` and ``groups/`` are written from it (and ``share_partitions/``).  Each table is
    written once and read back from its files for what follows
    (:meth:`audit.io.outputs.StagedOutput.write_table`): one Spark job per table, nothing judged twice.
    """
    from ..tables import conform

    history = cfg.mode == "history"
    timeline = state.leader_timeline
    names = timeline.select("topic_id", "topic") if timeline is not None else state.topic_names
    # the owner tables, joined into findings, committed offsets and share-partitions: computed once
    group_state, owners = group_tables(spark, d.records, names)
    group_state, owners = checkpoint_on_first_use(group_state), checkpoint_on_first_use(owners)
    findings = with_owners(
        judge(
            spark,
            d.commits,
            state.epochs,
            state.bounds,
            epoch_end_offsets=state.epoch_end_offsets,
            history=history,
            replicas=state.replicas,
            expansion_offsets=state.expansion_offsets,
        ),
        group_state,
        owners,
    )
    share_partitions = None
    if d.share_raw is not None:
        from ..share import judge_shares

        # share states name their topic by id: the metadata log's names, and each replica's partition.metadata
        share_names = state.replicas.select("topic_id", "topic") if state.replicas is not None else None
        if names is not None:
            share_names = names if share_names is None else share_names.unionByName(names.select("topic_id", "topic"))
        # a live cluster answered OffsetsForLeaderEpoch for the states' epochs; log dirs: computed from the caches
        live_eeo = state.epoch_end_offsets if cfg.bootstrap_servers else None
        share_findings, shares = judge_shares(spark, d.share_raw, state.epochs, state.bounds, share_names, live_eeo)
        share_findings = with_owners(in_scope(share_findings, cfg), group_state, owners).withColumn(
            "group_type", F.coalesce(F.col("group_type"), F.lit("share"))
        )
        findings = findings.unionByName(share_findings)
        share_partitions = out.write_table("share_partitions", conform("share_partitions", in_scope(shares, cfg)))
    findings = out.write_table("findings", conform("findings", findings))
    committed = out.write_table(
        "committed_offsets",
        conform(
            "committed_offsets", with_owners(with_verdicts(d.commits, findings, state.bounds), group_state, owners)
        ),
    )
    # ages against the audit's own time when it reads a live cluster; log dirs: the newest audited commit
    as_of = datetime.fromisoformat(started_at) if cfg.bootstrap_servers else None
    groups = out.write_table(
        "groups",
        conform("groups", group_status(spark, committed, findings, group_state, as_of, cfg.stale_after_seconds)),
    )
    return Judged(findings, committed, groups, share_partitions, group_state, owners)


def context_tables(cfg: AuditConfig, d: Decoded, state) -> dict:
    """Return the tables written beside the judged ones (name -> DataFrame, conformed).

    ``epochs``, ``bounds``, the timelines where the metadata log was read, ``commits`` in ``--mode history``.
    """
    from ..tables import conform

    tables = {}
    if cfg.mode == "history":
        tables["commits"] = conform("commits", d.commits.drop("is_latest", "broker_id", "live_count"))
    tables.update(epochs=conform("epochs", state.epochs), bounds=conform("bounds", state.bounds))
    if state.leader_timeline is not None:
        tables["leader_timeline"] = conform("leader_timeline", state.leader_timeline)
    if state.broker_timeline is not None:
        tables["broker_timeline"] = conform("broker_timeline", state.broker_timeline)
    return tables
