"""The analysts' views over an audit's output: ``sql/views/analyst_views.sql`` bound to the committed run.

The views (``koa_findings``, ``koa_committed_offsets``, ``koa_epochs``, ``koa_bounds``, then
``koa_latest_commits``, ``koa_findings_by_group``, ``koa_epoch_end_offsets``) read the tables of one output.  On a
local disk or HDFS those are under ``--output DIR`` itself; on an object store each run has its own
``DIR/runs/<run>/`` and ``DIR/summary.json`` names the committed one (``run_dir``, :mod:`audit.io.outputs`), which
is where the views must point.  The SQL file is installed with the package (``audit.sql``, ``views/``).
"""

from __future__ import annotations

from ..io import fs
from ..io.outputs import is_object_store, read_audit_summary
from ..queries import sql_dir

__all__ = ["VIEWS", "analyst_views_sql", "committed_tables_dir", "register_views", "view_statements"]

#: the views the file defines, in its order
VIEWS = (
    "koa_findings",
    "koa_committed_offsets",
    "koa_epochs",
    "koa_bounds",
    "koa_latest_commits",
    "koa_findings_by_group",
    "koa_epoch_end_offsets",
)


def committed_tables_dir(spark, output: str) -> str:
    """Return the directory holding the committed run's tables of the audit output ``output``.

    That is ``output`` itself, except on an object store, where it is the run its ``summary.json`` names
    (``run_dir``).

    Raises
    ------
    FileNotFoundError
        ``output`` holds no audit output (no ``summary.json``), or, on an object store, its marker names no run.
    """
    base = fs.to_uri(output).rstrip("/")
    marker = read_audit_summary(spark, base)
    if marker is None:
        raise FileNotFoundError(
            f"{output} holds no kafka-offset-audit output (no summary.json): give an --output of an audit"
        )
    if not is_object_store(base):
        return base
    run_dir = marker.get("run_dir")
    if not run_dir:
        raise FileNotFoundError(f"{base}/summary.json names no committed run (run_dir): was it written by an audit?")
    return str(run_dir).rstrip("/")


def analyst_views_sql(tables_dir: str) -> str:
    """Return the text of ``views/analyst_views.sql`` with ``${output}`` set to ``tables_dir``.

    ``tables_dir`` is where the tables are (:func:`committed_tables_dir`); the text runs as is in ``spark-sql``.
    """
    text = sql_dir().joinpath("views").joinpath("analyst_views.sql").read_text()
    return text.replace("${output}", tables_dir.replace("'", "\\'"))


def view_statements(sql: str) -> list[str]:
    """Split the views' SQL into its statements (``--`` comment lines dropped)."""
    lines = [line for line in sql.splitlines() if not line.lstrip().startswith("--")]
    return [s.strip() for s in "\n".join(lines).split(";") if s.strip()]


def register_views(spark, output: str) -> str:
    """Create the analysts' temporary views in ``spark`` over the committed run of ``output``.

    Parameters
    ----------
    spark : SparkSession
        The session the views are created in (temporary views: this session's only).
    output : str
        The audit's ``--output`` (a local path or a Hadoop URI).

    Returns
    -------
    str
        The directory the views read (:func:`committed_tables_dir`).

    Raises
    ------
    FileNotFoundError
        As :func:`committed_tables_dir`.
    """
    tables_dir = committed_tables_dir(spark, output)
    for statement in view_statements(analyst_views_sql(tables_dir)):
        spark.sql(statement)
    return tables_dir
