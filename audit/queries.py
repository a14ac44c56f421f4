"""The ``sql/`` queries: where they are (installed as package ``audit.sql``), their text, and their placeholders.

Every rule, view and table query of the audit is a file of ``sql/``; :mod:`audit.judge`, :mod:`audit.groups`,
:mod:`audit.owners`, :mod:`audit.share` and the sources load them from here.
"""

from __future__ import annotations

from importlib import resources

from pyspark.sql import SparkSession

from .spark import is_connect

__all__ = ["PARSE_FILL", "epoch_end_offsets_sql", "load_sql", "parse_ahead", "sql_dir"]


def sql_dir():
    """Return the directory of the ``sql/*.sql`` queries, a :class:`importlib.resources.abc.Traversable`.

    It is the package ``audit.sql`` as installed (a wheel maps the top-level ``sql/`` there), or, in a checkout
    that is not installed (``spark-submit jobs/audit_offsets.py``, pytest from the source tree), the ``sql/``
    beside ``audit/``.
    """
    try:
        return resources.files("audit.sql")
    except ModuleNotFoundError:
        from pathlib import Path

        beside = Path(__file__).resolve().parent.parent / "sql"
        if not (beside / "finding_log_truncation.sql").is_file():
            raise
        return beside


def load_sql(name: str) -> str:
    """Text of ``sql/<name>.sql`` (installed as package ``audit.sql``; :func:`sql_dir`)."""
    return sql_dir().joinpath(f"{name}.sql").read_text()


#: every placeholder of the ``sql/`` queries (the judge's, ``groups.sql``'s) as :func:`parse_ahead` fills them to
#: parse them early
PARSE_FILL = {
    "{judge_all}": "false",
    "{epoch_requests}": "commits",
    "{epochs}": "epochs",
    "{bounds}": "bounds",
    "{as_of}": "CAST(NULL AS TIMESTAMP)",
    "{stale_after_seconds}": "0",
    "{rule_order}": "array('OK')",
}


def epoch_end_offsets_sql(epoch_requests: str = "commits", epochs: str = "epochs", bounds: str = "bounds") -> str:
    """Return ``sql/epoch_end_offsets.sql``, which answers the rows of the view ``epoch_requests``.

    The rows are (topic, partition, committed_leader_epoch), answered from the views ``epochs`` and ``bounds``.
    """
    return (
        load_sql("epoch_end_offsets")
        .replace("{epoch_requests}", epoch_requests)
        .replace("{epochs}", epochs)
        .replace("{bounds}", bounds)
    )


def parse_ahead(spark: SparkSession):
    """Parse every ``sql/*.sql`` query once in a background (daemon) thread and return it.

    Nothing is analysed or run.  A fresh JVM parses its first SQL texts slowly (the ANTLR parser's set-up and
    decision caches: the audit's 16 queries take about 0.7 s the first time, 0.06 s the second), and each of
    those parses would otherwise hold up a stage of the audit.  The pipeline starts this before it reads, while
    the first Spark job waits for its Python workers.  Best effort: an error (a Spark build without this
    internal parser entry point) leaves the queries to be parsed where they run, as before; results never change.
    """
    import threading

    if is_connect(spark):  # the parser is the Connect server's
        thread = threading.Thread(target=lambda: None, name="koa-parse-ahead", daemon=True)
        thread.start()
        return thread
    texts = []
    for f in sql_dir().iterdir():
        if f.name.endswith(".sql"):
            text = f.read_text()
            for placeholder, value in PARSE_FILL.items():
                text = text.replace(placeholder, value)
            texts.append(text)

    def work():
        try:
            parser = spark._jsparkSession.sessionState().sqlParser()
            for text in texts:
                parser.parsePlan(text)
        except Exception:  # noqa: BLE001 - best effort, see above
            pass

    thread = threading.Thread(target=work, name="koa-parse-ahead", daemon=True)
    thread.start()
    return thread
