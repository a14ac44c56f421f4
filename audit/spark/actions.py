"""Running several Spark jobs at once, several small queries in one job, and keeping a table read more than once."""

from __future__ import annotations


from pyspark.sql import SparkSession


__all__ = [
    "checkpoint_on_first_use",
    "collect_together",
    "in_parallel",
    "inheriting",
]


def checkpoint_on_first_use(df):
    """Return ``df`` checkpointed lazily (``DataFrame.localCheckpoint(eager=False)``).

    For a table that later queries read more than once: the first Spark job that reads it computes its partitions
    and keeps them in the executors' block managers; every later query reads those blocks instead of planning and
    running ``df``'s lineage again.  No Spark job runs for the checkpoint itself (an eager one is a job of its own,
    and over Spark Connect a round trip that waits for it).

    Stay eager (``df.localCheckpoint()``) where one of these holds:

    - a ``DataFrame.observe`` metric of ``df`` is read right after (it is only set once a job ran);
    - ``df``'s errors must be raised here, inside the caller's ``try`` (a live cluster's read), not in whichever
      later job first reads it;
    - the next reader runs in one task (``compact`` of a small input), which would then also compute all of
      ``df``'s partitions.

    Results never change: only when and where the partitions are computed.
    """
    return df.localCheckpoint(eager=False)


def in_parallel(*fns):
    """Call ``fns`` at once, each in its own thread, and return their results in order.

    Spark runs jobs of several threads side by side; for the small tables of an audit a job is mostly the
    driver's planning and scheduling, which one thread leaves a core idle for.  Each thread gets the caller's
    Spark local properties (job group, scheduler pool: ``pyspark.inheritable_thread_target``), so a caller's
    cancellation or pool covers these jobs too.

    Raises
    ------
    Exception
        The first error, raised after all ended.
    """
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=len(fns), thread_name_prefix="koa") as pool:
        futures = [pool.submit(inheriting(fn)) for fn in fns]
    return [f.result() for f in futures]


def inheriting(fn):
    """Wrap ``fn`` to run, in another thread, with this thread's Spark local properties and tags.

    The wrapping is ``pyspark.inheritable_thread_target`` given the active or default session; without such a
    session, ``fn`` itself is returned.
    """
    from pyspark import inheritable_thread_target
    from pyspark.errors import PySparkRuntimeError

    try:
        session = SparkSession.active()  # the thread's, or the default one (a thread of in_parallel has none)
    except PySparkRuntimeError:
        return fn
    return inheritable_thread_target(session)(fn)


def collect_together(queries: dict) -> dict[str, list[dict]]:
    """Collect several small, bounded queries in one Spark job instead of one each.

    The queries (name -> DataFrame) are each an aggregate, or sorted and ``limit``-ed.  They run as a union of
    the queries, each row carrying its query's columns in a struct of its own (the others null), so every value
    keeps its Spark type and each query its row order.  Only for bounded results: the rows are all brought to the
    driver.

    Returns
    -------
    dict
        Name -> rows (``Row.asDict()``: dicts, nested structs kept as ``Row``).

    Raises
    ------
    Exception
        Whatever Spark raises for the queries.
    """
    if not queries:
        return {}
    names = list(queries)
    # SQL text, one py4j call per query: built from Column objects it took O(queries^2) calls, each waiting for
    # the GIL while another thread (the expectation suite) runs Python
    schemas = {n: queries[n].schema for n in names}
    types = {n: _ddl(schemas[n]) for n in names}
    parts = []
    for i, n in enumerate(names):
        row = "named_struct(" + ", ".join(f"'{f.name}', `{f.name}`" for f in schemas[n].fields) + ")"
        parts.append(
            queries[n].selectExpr(
                f"{i} AS _q",
                *[(row if m == n else f"CAST(NULL AS {types[m]})") + f" AS _{j}" for j, m in enumerate(names)],
            )
        )
    union = parts[0]
    for p in parts[1:]:
        union = union.union(p)
    out: dict[str, list[dict]] = {n: [] for n in names}
    for row in union.collect():
        i = row["_q"]
        out[names[i]].append(row[f"_{i}"].asDict())
    return out


def _ddl(dt) -> str:
    """``dt`` as a SQL type (field names quoted), for ``CAST(NULL AS ...)``."""
    from pyspark.sql.types import ArrayType, MapType, StructType

    if isinstance(dt, StructType):
        return "struct<" + ",".join(f"`{f.name}`:{_ddl(f.dataType)}" for f in dt.fields) + ">"
    if isinstance(dt, ArrayType):
        return f"array<{_ddl(dt.elementType)}>"
    if isinstance(dt, MapType):
        return f"map<{_ddl(dt.keyType)},{_ddl(dt.valueType)}>"
    return dt.simpleString()
