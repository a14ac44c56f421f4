"""The console's summary of an audit: groups worst first, then the first findings."""

from __future__ import annotations


from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from ..groups import worst_first
from ..tables import SEVERITIES


__all__ = [
    "CONSOLE_FINDINGS",
    "console_queries",
    "console_table",
    "render_console",
]

CONSOLE_FINDINGS = 50


def _fmt(v) -> str:
    return "-" if v is None else str(v)


#: the groups table's statuses, worst first (:mod:`audit.groups`)


def console_table(
    findings: DataFrame,
    committed: DataFrame,
    bounds: DataFrame,
    limit: int = CONSOLE_FINDINGS,
    groups: DataFrame | None = None,
) -> str:
    """:func:`console_queries` collected in one Spark job and rendered (:func:`render_console`)."""
    from ..spark import collect_together

    return render_console(collect_together(console_queries(findings, committed, bounds, limit, groups)), limit)


def console_queries(
    findings: DataFrame,
    committed: DataFrame,
    bounds: DataFrame,
    limit: int = CONSOLE_FINDINGS,
    groups: DataFrame | None = None,
) -> dict[str, DataFrame]:
    """Build the console table's queries (``findings``, ``groups`` when given, ``committed``).

    Each is sorted and limited to ``limit + 1`` rows (no job): what :func:`render_console` renders.

    A ``kafka-consumer-groups --describe``-style text table, findings first, then the groups (``groups``: the
    ``groups`` table, :func:`audit.groups.group_status`; one line per group, worst status first) and the
    committed offsets.

    Collects at most ``limit`` findings, ``limit`` groups and ``limit`` commit rows (bounded, sorted by severity).
    ``LAG`` is the table's own: unclamped, negative past the log end (``committed`` without the column: from
    ``bounds``' log end offset).
    When the inputs carry the owner columns (:data:`audit.owners.OWNER_COLUMNS`), findings show the
    partition's last owner as ``OWNER`` (``client.id`` and host) and the commit rows Kafka's
    ``CONSUMER-ID``, ``HOST`` and ``CLIENT-ID``; ``-`` where the group recorded no member.  A
    ``REPLICA_DIVERGENCE`` row has no group (``-``); its ``OWNER`` names the broker holding the lost lineage.
    """
    f_cols, c_cols = set(findings.columns), set(committed.columns)  # read once: each read is a py4j round trip
    queries = {"findings": _findings_query(findings, f_cols, limit)}
    if groups is not None:
        queries["groups"] = _groups_query(groups, limit)
    queries["committed"] = _committed_query(committed, c_cols, bounds, limit)
    return queries


def _opt(cols: set[str], name: str):
    """Column ``name`` when ``cols`` has it, else a null string."""
    return F.col(name) if name in cols else F.lit(None).cast("string")


def _owner(f_cols: set[str]):
    """Build the findings' ``OWNER`` column: the diverged replica's broker, else the owner's ``client.id`` (host)."""
    return F.when(
        _opt(f_cols, "replica_broker").isNotNull(),  # REPLICA_DIVERGENCE: the replica, not a group
        F.concat(F.lit("replica on broker "), _opt(f_cols, "replica_broker").cast("string")),
    ).when(
        _opt(f_cols, "owner_client_id").isNotNull(),
        F.concat_ws(
            " ",
            _opt(f_cols, "owner_client_id"),
            F.concat(F.lit("("), F.coalesce(_opt(f_cols, "owner_client_host"), F.lit("?")), F.lit(")")),
        ),
    )


def _findings_query(findings: DataFrame, f_cols: set[str], limit: int) -> DataFrame:
    """Query the console's findings, most severe first, at most ``limit + 1`` rows (no job)."""
    sev = F.create_map(*[x for i, s in enumerate(SEVERITIES) for x in (F.lit(s), F.lit(i))])
    return (
        findings.orderBy(sev[F.col("severity")], "group_id", "topic", "partition", "finding")
        .select(
            "severity",
            "finding",
            _opt(f_cols, "cause").alias("cause"),
            "group_id",
            "topic",
            "partition",
            "committed_offset",
            "committed_leader_epoch",
            "divergence_offset",
            "records_at_risk",
            "log_start_offset",
            "log_end_offset",
            _owner(f_cols).alias("owner"),
        )
        .limit(limit + 1)
    )


def _groups_query(groups: DataFrame, limit: int) -> DataFrame:
    """Query the console's groups, worst status first, at most ``limit + 1`` rows (no job)."""
    return (
        worst_first(groups)
        .select(
            "group_id",
            "status",
            "group_state",
            "partitions_committed",
            "total_lag",
            "max_lag",
            "worst_verdict",
            F.when(
                F.col("worst_topic").isNotNull(),
                F.concat_ws("-", "worst_topic", F.col("worst_partition").cast("string")),
            ).alias("at"),
            "records_at_risk",
            "latest_commit_age_seconds",
        )
        .limit(limit + 1)
    )


def _committed_query(committed: DataFrame, c_cols: set[str], bounds: DataFrame, limit: int) -> DataFrame:
    """Query the console's committed offsets, those with a finding first, at most ``limit + 1`` rows (no job).

    ``lag`` comes from ``bounds``' log end offset when ``committed`` has no such column.
    """
    if "lag" not in c_cols:
        committed = committed.join(
            bounds.select("topic", "partition", "log_end_offset"), ["topic", "partition"], "left"
        ).withColumn("lag", F.col("log_end_offset") - F.col("committed_offset"))
    return (
        committed.orderBy(F.col("verdict") == "OK", "group_id", "topic", "partition")
        .select(
            "group_id",
            "topic",
            "partition",
            "committed_offset",
            "committed_leader_epoch",
            "log_end_offset",
            "lag",
            "verdict",
            *[_opt(c_cols, c).alias(c) for c in ("owner_member_id", "owner_client_host", "owner_client_id")],
        )
        .limit(limit + 1)
    )


def render_console(parts: dict[str, list], limit: int = CONSOLE_FINDINGS) -> str:
    """Render the console table from :func:`console_queries`' rows.

    The rows are name -> rows, each a dict or ``Row`` in the queries' column order; ``groups`` absent: no groups
    section.
    """
    frows, crow = parts["findings"], parts["committed"]
    out = []
    heads = [
        "SEVERITY",
        "FINDING",
        "CAUSE",
        "GROUP",
        "TOPIC",
        "PARTITION",
        "CURRENT-OFFSET",
        "EPOCH",
        "DIVERGENCE-OFFSET",
        "AT-RISK",
        "LOG-START-OFFSET",
        "LOG-END-OFFSET",
        "OWNER",
    ]
    rows = [[_fmt(v) for v in _values(r)] for r in frows[:limit]]
    out.append("FINDINGS" if rows else "FINDINGS: none")
    if rows:
        out.append(_table(heads, rows))
        if len(frows) > limit:
            out.append(f"... more findings in findings/ (showing {limit})")
    if "groups" in parts:
        grows = parts["groups"]
        out.append("")
        out.append("GROUPS")
        out.append(
            _table(
                [
                    "GROUP",
                    "STATUS",
                    "STATE",
                    "PARTITIONS",
                    "TOTAL-LAG",
                    "MAX-LAG",
                    "WORST",
                    "AT",
                    "AT-RISK",
                    "LAST-COMMIT-AGE-S",
                ],
                [[_fmt(v) for v in _values(r)] for r in grows[:limit]],
            )
        )
        if len(grows) > limit:
            out.append(f"... more in groups/ (showing {limit})")
    out.append("")
    out.append("COMMITTED OFFSETS")
    out.append(
        _table(
            [
                "GROUP",
                "TOPIC",
                "PARTITION",
                "CURRENT-OFFSET",
                "EPOCH",
                "LOG-END-OFFSET",
                "LAG",
                "VERDICT",
                "CONSUMER-ID",
                "HOST",
                "CLIENT-ID",
            ],
            [[_fmt(v) for v in _values(r)] for r in crow[:limit]],
        )
    )
    if len(crow) > limit:
        out.append(f"... more in committed_offsets/ (showing {limit})")
    return "\n".join(out)


def _values(row) -> list:
    return list(row.values()) if isinstance(row, dict) else list(row)


def _table(heads: list[str], rows: list[list[str]]) -> str:
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(heads)]
    line = lambda cells: "  ".join(c.ljust(w) for c, w in zip(cells, widths)).rstrip()  # noqa: E731
    return "\n".join([line(heads)] + [line(r) for r in rows])
