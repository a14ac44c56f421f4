"""Writing the output contract atomically, and the console table.

Layout under ``--output DIR``:

* ``findings/``, ``committed_offsets/``, ``epochs/``, ``bounds/`` (Parquet) and, in history mode,
  ``commits/`` (Parquet);
* ``summary.json``.

Everything is first written to a sibling staging dir ``DIR.staging-<run id>``; only when all of it
is written does the staging dir replace ``DIR`` (rename), so a rerun either fully replaces the
previous result or leaves it untouched.

An object store (``s3a://``, ``gs://`` ...: :data:`OBJECT_STORE_SCHEMES`) has no atomic rename: a "rename" of a
directory copies and deletes object by object, and a reader in between would see half of each.  There each run
writes its own directory ``DIR/runs/<run id>/`` (the same layout as above), and ``DIR/summary.json``, one object
written last with a single PUT, is the commit marker: it names the committed run (``run_dir``), and readers
resolve the tables through it.  Until that PUT the previous run stays the committed one
and readable; a killed run leaves only its own ``runs/<run id>/``, which no marker names and a later run
removes.  The run before the committed one is kept (a reader that resolved the marker a moment earlier can
still read it); older ones are removed after each commit.
"""

from __future__ import annotations

import json
import os
import re
import socket
import uuid

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from ..sources import fs
from ..spark import pid_alive
from ..tables import SEVERITIES, TABLES

CONSOLE_FINDINGS = 50


def check_output_parent(output: str, spark: SparkSession | None = None) -> None:
    """Fail fast unless the directory that will hold ``output`` can be created and written.

    The result is staged in a sibling directory and renamed into place, so the nearest existing
    ancestor of ``output`` must be a directory (not a file) and, for a local path, writable by
    this process.  Local paths need no Spark; a Hadoop URI is checked through ``spark``'s
    filesystem and skipped without one.  Raises :class:`audit.sources.fs.InputError` naming the
    path to fix.
    """
    uri = fs.to_uri(output).rstrip("/")
    if fs.is_local(uri):
        path = fs.local_path(uri)
        anc = os.path.dirname(path)
        while anc and not os.path.exists(anc) and os.path.dirname(anc) != anc:
            anc = os.path.dirname(anc)
        if os.path.exists(anc) and not os.path.isdir(anc):
            raise fs.InputError(
                f"--output {output!r} cannot be created: {anc!r} is a file, not a directory; "
                "give an output path whose parent is a directory (or can be created)"
            )
        if os.path.isdir(anc) and not os.access(anc, os.W_OK | os.X_OK):
            raise fs.InputError(
                f"--output {output!r} cannot be written: no write permission on {anc!r}; "
                "give an output path in a directory you can write"
            )
        return
    if spark is None:
        return
    p = fs._store(spark, uri).nearest_existing_ancestor_is_file()
    if p is not None:
        raise fs.InputError(
            f"--output {output!r} cannot be created: {p!r} is a file, not a directory; "
            "give an output path whose parent is a directory (or can be created)"
        )


def check_output_target(spark: SparkSession, output: str, log_dirs: list[str], *, replaced: bool = True) -> None:
    """Fail fast unless ``output`` is safe to replace with a new result.

    Every run replaces the whole output directory, so it must not be, contain or lie inside
    one of ``log_dirs`` (the brokers' data), its parent must be a writable directory (see
    :func:`check_output_parent`), and an existing non-empty directory must be a previous
    kafka-offset-audit output (its ``summary.json`` says ``"tool": "kafka-offset-audit"``).
    Raises :class:`audit.sources.fs.InputError` naming what to fix.  ``replaced=False`` (``--history``,
    appended to, never replaced) checks only the overlap with ``log_dirs`` and the parent.
    """

    def canonical(path: str) -> str:  # symlinks resolved for local paths
        uri = fs.to_uri(path).rstrip("/")
        return "file:" + os.path.realpath(fs.local_path(uri)) if fs.is_local(uri) else uri

    out, o = fs.to_uri(output).rstrip("/"), canonical(output)
    for root in log_dirs:
        r = canonical(root)
        if o == r or o.startswith(r + "/") or r.startswith(o + "/"):
            raise fs.InputError(
                f"{'--output' if replaced else '--history'} {output!r} overlaps --log-dirs {root!r}: "
                "choose a directory outside the broker log dirs"
            )
    check_output_parent(output, spark)
    if not replaced:
        return
    try:
        names = fs.children(spark, out)
    except NotADirectoryError:
        raise fs.InputError(f"--output {output!r} is a file: give a directory") from None
    if not names:
        return  # new or empty
    if is_object_store(out) and set(names) <= {RUNS_DIR, "summary.json"} and "summary.json" not in names:
        return  # only runs that never committed (killed before their marker)
    try:
        summary = fs.read_json(spark, f"{out}/summary.json")
    except ValueError:
        summary = None
    if not (isinstance(summary, dict) and summary.get("tool") == "kafka-offset-audit"):
        raise fs.InputError(
            f"--output {output!r} is a non-empty directory that is not a kafka-offset-audit output (no summary.json "
            "of ours): every run replaces the whole directory, so give a new or empty one, or a previous audit's output"
        )


_HOST = re.sub(r"[^A-Za-z0-9.]", "_", socket.gethostname())[:64] or "host"
_LEFTOVER = re.compile(r"\.(?:staging|old)-(?P<host>[A-Za-z0-9._]+)-(?P<pid>\d+)-[0-9a-f]{12}$")
_RUN_DIR = re.compile(r"^(?P<host>[A-Za-z0-9._]+)-(?P<pid>\d+)-[0-9a-f]{12}$")

#: URI schemes of object stores (no atomic rename): the output is committed by its marker (module docstring)
OBJECT_STORE_SCHEMES = {"s3a", "s3", "s3n", "gs", "oss", "cos", "cosn", "obs"}
#: the directory of an object-store output holding one directory per run
RUNS_DIR = "runs"


def is_object_store(uri: str) -> bool:
    """Whether ``uri`` is on an object store (:data:`OBJECT_STORE_SCHEMES`)."""
    return uri.partition("://")[0].lower() in OBJECT_STORE_SCHEMES if "://" in uri else False


def kill_point(name: str) -> None:
    """A point of the commit where ``KOA_KILL_AT=name`` kills this process (SIGKILL), for the tests that prove
    a run killed there loses nothing committed; nothing otherwise."""
    if os.environ.get("KOA_KILL_AT") == name:
        import signal

        os.kill(os.getpid(), signal.SIGKILL)


class StagedOutput:
    """A staging directory that becomes ``output`` on :meth:`commit`.

    Its name, ``<output>.staging-<host>-<pid>-<run>``, says which process writes it, so a later run can tell
    the leftovers of a killed run (:meth:`clean_leftovers`) from a directory another live run is writing.
    """

    def __init__(self, spark: SparkSession, output: str):
        self.spark = spark
        self.output = fs.to_uri(output).rstrip("/")
        run = f"{_HOST}-{os.getpid()}-{uuid.uuid4().hex[:12]}"
        self.object_store = is_object_store(self.output)
        if self.object_store:
            self.staging = f"{self.output}/{RUNS_DIR}/{run}"
        else:
            self.staging = f"{self.output}.staging-{run}"
        self.old = f"{self.output}.old-{run}"

    @property
    def committed(self) -> str:
        """Where the tables are once committed: ``output``, or this run's directory on an object store."""
        return self.staging if self.object_store else self.output

    def clean_leftovers(self) -> dict[str, list[str]]:
        """Delete the staging (or swapped-out ``.old``) directories beside ``output`` left by runs that were killed:
        those named for this host and a process that no longer exists.  Returns ``{"removed": [...], "kept": [...]}``
        (names; kept: another host's or a live process's, or named the way earlier versions named them, which
        this run cannot judge)."""
        res: dict[str, list[str]] = {"removed": [], "kept": []}
        if self.object_store:
            return self._clean_runs(res)
        parent, _, base = self.output.rpartition("/")
        for name in sorted(fs.children(self.spark, parent) or []):
            if not (name.startswith(base + ".staging-") or name.startswith(base + ".old-")):
                continue
            m = _LEFTOVER.search(name[len(base) :])
            if (
                m
                and m.group("host") == _HOST
                and int(m.group("pid")) != os.getpid()
                and not pid_alive(int(m.group("pid")))
            ):
                if name.startswith(base + ".old-") and not fs.exists(self.spark, self.output):
                    # killed between its two renames (no atomic exchange there): the previous output comes back
                    fs.rename(self.spark, f"{parent}/{name}", self.output)
                    res.setdefault("restored", []).append(name)
                    continue
                fs.delete(self.spark, f"{parent}/{name}")
                res["removed"].append(name)
            else:
                res["kept"].append(name)
        return res

    def path(self, name: str) -> str:
        return f"{self.staging}/{name}"

    def write_parquet(self, name: str, df: DataFrame) -> None:
        df.write.mode("overwrite").parquet(self.path(name))

    def write_table(self, name: str, df: DataFrame) -> DataFrame:
        """Write output table ``name`` (:data:`audit.tables.TABLES`) once and return it read back from the written
        files with the contract's schema: one Spark job, and what follows reads the result instead of computing
        ``df`` again (no checkpoint, no schema inference)."""
        from ..tables import ddl

        self.write_parquet(name, df)
        return self.spark.read.schema(ddl(name)).parquet(self.path(name))

    def write_parquet_all(self, tables: dict[str, DataFrame], threads: int = 2) -> None:
        """:meth:`write_parquet` of every ``name -> DataFrame``, ``threads`` Spark jobs at a time (each write of a
        small table is mostly the driver's planning and commit, so two overlap on two cores).  Raises the first
        write's error after the others ended."""
        if threads <= 1 or len(tables) <= 1:
            for name, df in tables.items():
                self.write_parquet(name, df)
            return
        from concurrent.futures import ThreadPoolExecutor

        from ..spark import inheriting

        with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="koa-write") as pool:
            futures = [pool.submit(inheriting(self.write_parquet), name, df) for name, df in tables.items()]
        for f in futures:
            f.result()

    def write_json(self, name: str, obj) -> None:
        fs.write_small(self.spark, self.path(name), json.dumps(obj, indent=2, sort_keys=False, default=str).encode())

    def _clean_runs(self, res: dict[str, list[str]], keep: tuple[str, ...] = ()) -> dict[str, list[str]]:
        """Object store: remove ``runs/<run>`` dirs of this host's ended processes that the marker names neither
        as the committed run nor as the previous one, nor ``keep`` lists (killed runs; superseded ones)."""
        marker = fs.read_json(self.spark, f"{self.output}/summary.json")
        named = (
            {marker.get("run_dir"), marker.get("previous_run_dir"), *keep} if isinstance(marker, dict) else set(keep)
        )
        runs = f"{self.output}/{RUNS_DIR}"
        for name in sorted(fs.children(self.spark, runs) or []):
            path = f"{runs}/{name}"
            if path in named or path == self.staging:
                continue
            m = _RUN_DIR.match(name)
            if (
                m
                and m.group("host") == _HOST
                and int(m.group("pid")) != os.getpid()
                and not pid_alive(int(m.group("pid")))
            ):
                fs.delete(self.spark, path)
                res["removed"].append(f"{RUNS_DIR}/{name}")
            else:
                res["kept"].append(f"{RUNS_DIR}/{name}")
        return res

    def commit(self) -> None:
        """Replace ``output`` with the staging dir (old result removed only after the swap); on an object store,
        write the marker naming this run, then remove the runs before the previous one."""
        if self.object_store:
            self._commit_marker()
            return
        had_old = fs.exists(self.spark, self.output)
        kill_point("before-swap")
        if had_old and fs.is_local(self.output) and fs.exchange(self.output, self.staging):
            # one atomic step (Linux renameat2 RENAME_EXCHANGE): output is the new run, staging the old one
            kill_point("after-swap")
            fs.delete(self.spark, self.staging)
            return
        if had_old:
            fs.rename(self.spark, self.output, self.old)
        kill_point("between-renames")
        try:
            fs.rename(self.spark, self.staging, self.output)
        except Exception:
            if had_old:
                fs.rename(self.spark, self.old, self.output)
            raise
        kill_point("after-swap")
        if had_old:
            fs.delete(self.spark, self.old)

    def _commit_marker(self) -> None:
        previous = fs.read_json(self.spark, f"{self.output}/summary.json")
        previous_dir = previous.get("run_dir") if isinstance(previous, dict) else None
        summary = json.loads(fs.read_small(self.spark, self.path("summary.json"), 64 << 20).decode("utf-8"))
        summary.update(run_dir=self.staging, previous_run_dir=previous_dir)
        kill_point("before-marker")
        fs.write_small(
            self.spark,
            f"{self.output}/summary.json",
            json.dumps(summary, indent=2, sort_keys=False, default=str).encode(),
        )
        kill_point("after-marker")
        older = previous.get("previous_run_dir") if isinstance(previous, dict) else None
        if older and older not in (self.staging, previous_dir):
            fs.delete(self.spark, older)
        self._clean_runs({"removed": [], "kept": []}, keep=(previous_dir,) if previous_dir else ())

    def abort(self) -> None:
        fs.delete(self.spark, self.staging)


def _fmt(v) -> str:
    return "-" if v is None else str(v)


#: the groups table's statuses, worst first (:mod:`audit.groups`)
STATUS_ORDER = ["AT_RISK", "STALE", "WARN", "OK"]


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
    """The console table's queries (``findings``, ``groups`` when given, ``committed``), each sorted and limited
    to ``limit + 1`` rows (no job): what :func:`render_console` renders.

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

    def opt(cols, name):
        return F.col(name) if name in cols else F.lit(None).cast("string")

    owner = F.when(
        opt(f_cols, "replica_broker").isNotNull(),  # REPLICA_DIVERGENCE: the replica, not a group
        F.concat(F.lit("replica on broker "), opt(f_cols, "replica_broker").cast("string")),
    ).when(
        opt(f_cols, "owner_client_id").isNotNull(),
        F.concat_ws(
            " ",
            opt(f_cols, "owner_client_id"),
            F.concat(F.lit("("), F.coalesce(opt(f_cols, "owner_client_host"), F.lit("?")), F.lit(")")),
        ),
    )
    sev = F.create_map(*[x for i, s in enumerate(SEVERITIES) for x in (F.lit(s), F.lit(i))])
    frows = (
        findings.orderBy(sev[F.col("severity")], "group_id", "topic", "partition", "finding")
        .select(
            "severity",
            "finding",
            opt(f_cols, "cause").alias("cause"),
            "group_id",
            "topic",
            "partition",
            "committed_offset",
            "committed_leader_epoch",
            "divergence_offset",
            "records_at_risk",
            "log_start_offset",
            "log_end_offset",
            owner.alias("owner"),
        )
        .limit(limit + 1)
    )
    queries = {"findings": frows}
    if groups is not None:
        status = F.create_map(*[x for i, s in enumerate(STATUS_ORDER) for x in (F.lit(s), F.lit(i))])
        queries["groups"] = (
            groups.orderBy(
                status[F.col("status")],
                F.col("records_at_risk").desc_nulls_last(),
                F.col("total_lag").desc_nulls_last(),
                "group_id",
            )
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
    if "lag" not in c_cols:
        committed = committed.join(
            bounds.select("topic", "partition", "log_end_offset"), ["topic", "partition"], "left"
        ).withColumn("lag", F.col("log_end_offset") - F.col("committed_offset"))
    queries["committed"] = (
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
            *[opt(c_cols, c).alias(c) for c in ("owner_member_id", "owner_client_host", "owner_client_id")],
        )
        .limit(limit + 1)
    )
    return queries


def render_console(parts: dict[str, list], limit: int = CONSOLE_FINDINGS) -> str:
    """The console table from :func:`console_queries`' rows (name -> rows, each a dict or ``Row`` in the
    queries' column order; ``groups`` absent: no groups section)."""
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


#: the tables ``--table-prefix`` registers (those the run wrote): every table of the output contract
OUTPUT_TABLES = tuple(TABLES)


def register_tables(spark: SparkSession, output: str, prefix: str) -> list[str]:
    """Register the output's Parquet dirs as tables ``<prefix><name>`` in the Spark catalog.

    External tables (``USING parquet LOCATION``) pointing at the committed output, so a rerun's
    atomic swap keeps them valid.  ``prefix`` may name a database (``audit.koa_``).  Returns the
    table names created.
    """
    import re

    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?", prefix + "x"):
        raise ValueError(f"--table-prefix {prefix!r}: use letters, digits and _ (optionally db.prefix)")
    base = fs.to_uri(output).rstrip("/")
    made = []
    for name in OUTPUT_TABLES:
        if not fs.exists(spark, f"{base}/{name}"):
            continue
        table = f"{prefix}{name}"
        spark.sql(f"DROP TABLE IF EXISTS {table}")
        spark.sql(f"CREATE TABLE {table} USING parquet LOCATION '{base}/{name}'")
        made.append(table)
    return made
