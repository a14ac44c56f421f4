"""Writing the output contract atomically, and registering what was committed as tables.

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

from ..spark import pid_alive
from ..tables import TABLES
from . import fs


__all__ = [
    "HOST",
    "OBJECT_STORE_SCHEMES",
    "OUTPUT_TABLES",
    "RUNS_DIR",
    "StagedOutput",
    "check_output_parent",
    "check_output_target",
    "is_object_store",
    "kill_point",
    "read_audit_summary",
    "register_tables",
]


def check_output_parent(output: str, spark: SparkSession | None = None) -> None:
    """Fail fast unless the directory that will hold ``output`` can be created and written.

    The result is staged in a sibling directory and renamed into place, so the nearest existing
    ancestor of ``output`` must be a directory (not a file) and, for a local path, writable by
    this process.  Local paths need no Spark; a Hadoop URI is checked through ``spark``'s
    filesystem and skipped without one.  Raises :class:`audit.io.fs.InputError` naming the
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
    Raises :class:`audit.io.fs.InputError` naming what to fix.  ``replaced=False`` (``--history``,
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
    if read_audit_summary(spark, out) is None:
        raise fs.InputError(
            f"--output {output!r} is a non-empty directory that is not a kafka-offset-audit output (no summary.json "
            "of ours): every run replaces the whole directory, so give a new or empty one, or a previous audit's output"
        )


HOST = re.sub(r"[^A-Za-z0-9.]", "_", socket.gethostname())[:64] or "host"
_LEFTOVER = re.compile(r"\.(?:staging|old)-(?P<host>[A-Za-z0-9._]+)-(?P<pid>\d+)-[0-9a-f]{12}$")
_RUN_DIR = re.compile(r"^(?P<host>[A-Za-z0-9._]+)-(?P<pid>\d+)-[0-9a-f]{12}$")

#: URI schemes of object stores (no atomic rename): the output is committed by its marker (module docstring)
OBJECT_STORE_SCHEMES = {"s3a", "s3", "s3n", "gs", "oss", "cos", "cosn", "obs"}
#: the directory of an object-store output holding one directory per run
RUNS_DIR = "runs"


def read_audit_summary(spark, output: str) -> dict | None:
    """Return the ``summary.json`` of the audit output ``output`` (on an object store, its commit marker).

    None when there is none, or it is not JSON, or not a kafka-offset-audit summary (``"tool"``).
    """
    try:
        summary = fs.read_json(spark, f"{fs.to_uri(output).rstrip('/')}/summary.json")
    except ValueError:
        return None
    return summary if isinstance(summary, dict) and summary.get("tool") == "kafka-offset-audit" else None


def is_object_store(uri: str) -> bool:
    """Whether ``uri`` is on an object store (:data:`OBJECT_STORE_SCHEMES`)."""
    return uri.partition("://")[0].lower() in OBJECT_STORE_SCHEMES if "://" in uri else False


def kill_point(name: str) -> None:
    """Kill this process (SIGKILL) at commit point ``name`` when ``KOA_KILL_AT=name``; do nothing otherwise.

    A point of the commit where ``KOA_KILL_AT=name`` kills this process, for the tests that prove
    a run killed there loses nothing committed.
    """
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
        run = f"{HOST}-{os.getpid()}-{uuid.uuid4().hex[:12]}"
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
        """Delete the staging (or swapped-out ``.old``) directories beside ``output`` left by runs that were killed.

        Those deleted are the ones named for this host and a process that no longer exists.

        Returns
        -------
        dict[str, list[str]]
            ``{"removed": [...], "kept": [...]}`` (names; kept: another host's or a live process's, or named the way
            earlier versions named them, which this run cannot judge).
        """
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
                and m.group("host") == HOST
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
        """Write output table ``name`` (:data:`audit.tables.TABLES`) once; return it read back from the written files.

        It is read back with the contract's schema: one Spark job, and what follows reads the result instead of
        computing ``df`` again (no checkpoint, no schema inference).
        """
        from ..tables import ddl

        self.write_parquet(name, df)
        return self.spark.read.schema(ddl(name)).parquet(self.path(name))

    def write_parquet_all(self, tables: dict[str, DataFrame], threads: int = 2) -> None:
        """Run :meth:`write_parquet` of every ``name -> DataFrame``, ``threads`` Spark jobs at a time.

        Each write of a small table is mostly the driver's planning and commit, so two overlap on two cores.

        Raises
        ------
        Exception
            The first write's error, after the others ended.
        """
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
        """Remove, on an object store, ``runs/<run>`` dirs of this host's ended processes that nothing keeps.

        Removed are those the marker names neither as the committed run nor as the previous one, nor ``keep`` lists
        (killed runs; superseded ones).
        """
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
                and m.group("host") == HOST
                and int(m.group("pid")) != os.getpid()
                and not pid_alive(int(m.group("pid")))
            ):
                fs.delete(self.spark, path)
                res["removed"].append(f"{RUNS_DIR}/{name}")
            else:
                res["kept"].append(f"{RUNS_DIR}/{name}")
        return res

    def commit(self) -> None:
        """Replace ``output`` with the staging dir (old result removed only after the swap).

        On an object store, write the marker naming this run, then remove the runs before the previous one.
        """
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
