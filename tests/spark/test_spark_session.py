"""When the embedded driver JVM gets the quick-start JIT options, and the settings of a small audit."""

import os
import subprocess
import sys

import pytest

import audit.spark
import audit.spark.jvm
import audit.spark.session
from audit.spark import (
    WORKER_SITE,
    METASPACE_JAVA_OPTION,
    QUICK_START_JAVA_OPTIONS,
    driver_java_options,
    heap_java_options,
    quick_start_java_options,
)


def test_latest_mode_local_driver_gets_quick_start(monkeypatch):
    monkeypatch.delenv("KOA_DRIVER_JAVA_OPTIONS", raising=False)
    monkeypatch.setattr(audit.spark.jvm, "available_cpus", lambda: 16)
    assert driver_java_options("local[2]", quick_start=True, launching=True) == QUICK_START_JAVA_OPTIONS
    assert driver_java_options("local-cluster[2,1,1024]", quick_start=True, launching=True) == QUICK_START_JAVA_OPTIONS


def test_small_machine_adds_one_compiler_thread_and_the_serial_collector(monkeypatch):
    monkeypatch.delenv("KOA_DRIVER_JAVA_OPTIONS", raising=False)
    monkeypatch.setattr(audit.spark.jvm, "available_cpus", lambda: 2)
    opts = driver_java_options("local[2]", quick_start=True, launching=True).split()
    assert opts[:2] == QUICK_START_JAVA_OPTIONS.split()
    assert "-XX:CICompilerCount=1" in opts and "-XX:+UseSerialGC" in opts
    assert quick_start_java_options(cpus=3) == QUICK_START_JAVA_OPTIONS
    assert driver_java_options("local[2]", quick_start=False, launching=True) is None  # history mode: JVM defaults


def test_quick_start_driver_starts_with_half_its_memory_as_heap(monkeypatch):
    monkeypatch.delenv("KOA_DRIVER_JAVA_OPTIONS", raising=False)
    monkeypatch.setattr(audit.spark.jvm, "available_cpus", lambda: 16)
    assert heap_java_options("2g") == f"-Xms1024m {METASPACE_JAVA_OPTION}"
    assert heap_java_options("1536m") == heap_java_options("1536") == f"-Xms768m {METASPACE_JAVA_OPTION}"
    assert heap_java_options("4GB") == f"-Xms2048m {METASPACE_JAVA_OPTION}"
    assert heap_java_options("128m") == heap_java_options("lots") == ""  # never above the maximum, never unparsed
    opts = driver_java_options("local[2]", quick_start=True, launching=True, driver_memory="3g")
    assert opts == f"{QUICK_START_JAVA_OPTIONS} -Xms1536m {METASPACE_JAVA_OPTION}"
    assert driver_java_options("local[2]", quick_start=False, launching=True, driver_memory="3g") is None
    monkeypatch.setenv("KOA_DRIVER_JAVA_OPTIONS", "-Xss4m")
    assert driver_java_options("local[2]", quick_start=True, launching=True, driver_memory="3g") == "-Xss4m"


def test_local_cluster_executors_get_the_jit_options_not_the_drivers_heap(monkeypatch):
    """The executors' heap is spark.executor.memory (local-cluster's third number): -Xms of the driver's could
    exceed it."""
    monkeypatch.delenv("KOA_DRIVER_JAVA_OPTIONS", raising=False)
    monkeypatch.delenv("KOA_DRIVER_MEMORY", raising=False)  # the default, 2g
    seen = {}

    class Builder:
        def __getattr__(self, name):
            return lambda *a, **k: self

        def config(self, key, value=None):
            seen[key] = value
            return self

        def getOrCreate(self):
            raise RuntimeError("stop here")

    monkeypatch.setattr(audit.spark.session.SparkSession, "builder", Builder())
    monkeypatch.setattr(audit.spark.session.SparkSession, "getActiveSession", staticmethod(lambda: None))
    monkeypatch.delenv("PYSPARK_GATEWAY_PORT", raising=False)
    try:
        audit.spark.build_session("local-cluster[2,1,512]", quick_start=True)
    except RuntimeError:
        pass
    assert "-Xms1024m" in seen["spark.driver.extraJavaOptions"]
    assert "-Xms" not in seen["spark.executor.extraJavaOptions"]
    assert seen["spark.executor.extraJavaOptions"].startswith(QUICK_START_JAVA_OPTIONS)


def test_history_mode_or_running_jvm_keep_the_defaults(monkeypatch):
    monkeypatch.delenv("KOA_DRIVER_JAVA_OPTIONS", raising=False)
    monkeypatch.setattr(audit.spark.jvm, "available_cpus", lambda: 16)
    assert driver_java_options("local[2]", quick_start=False, launching=True) is None
    # a client-mode driver to a cluster runs on this machine: the same options as a local one
    assert driver_java_options("spark://host:7077", quick_start=True, launching=True) == QUICK_START_JAVA_OPTIONS
    assert driver_java_options("local[2]", quick_start=True, launching=False) is None  # spark-submit / reused session


def test_environment_overrides(monkeypatch):
    monkeypatch.setenv("KOA_DRIVER_JAVA_OPTIONS", "")
    assert driver_java_options("local[2]", quick_start=True, launching=True) is None
    monkeypatch.setenv("KOA_DRIVER_JAVA_OPTIONS", "-Xss4m")
    assert driver_java_options("local[2]", quick_start=False, launching=True) == "-Xss4m"


def test_small_input_settings_are_set_and_restored(spark):
    """tuned_for_input: SMALL_INPUT_CONF inside, the session's own values after; an unknown size decides later."""
    from audit.spark import SMALL_INPUT_BYTES, SMALL_TABLE_ROWS, SMALL_INPUT_CONF, tuned_for_input

    original = spark.conf.get("spark.sql.shuffle.partitions")
    spark.conf.set("spark.sql.shuffle.partitions", "3")
    spark.conf.unset("spark.sql.codegen.factoryMode")
    before = {k: spark.conf.get(k, None) for k in SMALL_INPUT_CONF}
    with tuned_for_input(spark, 1000):
        assert {k: spark.conf.get(k) for k in SMALL_INPUT_CONF} == SMALL_INPUT_CONF
    assert {k: spark.conf.get(k, None) for k in SMALL_INPUT_CONF} == before
    with tuned_for_input(spark, SMALL_INPUT_BYTES) as t:  # a large input, even when its commits table is small
        assert spark.conf.get("spark.sql.shuffle.partitions") == "3"
        t.decide(10)
        assert spark.conf.get("spark.sql.shuffle.partitions") == "3"
    with tuned_for_input(spark, None) as t:  # a live cluster: decided on the commits table's rows
        assert spark.conf.get("spark.sql.shuffle.partitions") == "3"
        t.decide(SMALL_TABLE_ROWS - 1)
        assert spark.conf.get("spark.sql.shuffle.partitions") == "1"
        t.decide(0)  # once only
    assert {k: spark.conf.get(k, None) for k in SMALL_INPUT_CONF} == before
    with tuned_for_input(spark, None) as t:
        t.decide(SMALL_TABLE_ROWS)
        assert spark.conf.get("spark.sql.shuffle.partitions") == "3"
    spark.conf.set("spark.sql.shuffle.partitions", original)


def test_small_input_tables_are_read_in_one_task(spark, tmp_path):
    """compact: a materialised table of a small input is read in one task (the same rows), a large input's keeps
    its partitions, and one shuffle partition set by hand is no small input; the log-dir readers' path lists take
    one slice per core for a small input, four otherwise."""
    from audit.sources.logdirs import binary_files
    from audit.spark import SMALL_INPUT_BYTES, compact, small_settings, tuned_for_input

    table = spark.range(0, 40, numPartitions=8).localCheckpoint()
    uris = [(tmp_path / f"f{i}").as_uri() for i in range(20)]
    cores = spark.sparkContext.defaultParallelism
    original = spark.conf.get("spark.sql.shuffle.partitions")
    try:
        spark.conf.set("spark.sql.shuffle.partitions", "1")  # by hand: not a small input
        assert not small_settings(spark) and compact(table).rdd.getNumPartitions() == 8
        with tuned_for_input(spark, SMALL_INPUT_BYTES):  # large
            assert compact(table).rdd.getNumPartitions() == 8
            assert binary_files(spark, uris).rdd.getNumPartitions() == min(20, 4 * cores)
        with tuned_for_input(spark, 1000):  # small
            assert small_settings(spark)
            small = compact(table)
            assert small.rdd.getNumPartitions() == 1
            assert sorted(r.id for r in small.collect()) == list(range(40))
            assert binary_files(spark, uris).rdd.getNumPartitions() == min(20, cores)
        assert not small_settings(spark)
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", original)


def test_balanced_slices_deal_the_largest_first_to_the_lightest_slice():
    """balanced_slices: every index once, no empty slice, the heaviest slice first, and the heaviest within
    LPT's bound: slices of equal counts (here 34, 18 and 6 bytes) fail it."""
    from audit.sources.logdirs import balanced_slices

    sizes = [10, 9, 8, 7, 6, 5, 4, 3, 2, 1]
    groups = balanced_slices(sizes, 3)
    assert sorted(i for g in groups for i in g) == list(range(10))
    totals = [sum(sizes[i] for i in g) for g in groups]
    assert totals == sorted(totals, reverse=True) and max(totals) <= 19, (groups, totals)
    assert all(g == sorted(g) for g in groups)
    assert balanced_slices([5, 0, 7], 8) == [[2], [0], [1]]  # never more slices than sizes, none empty
    assert balanced_slices([], 4) == []


def test_binary_paths_with_sizes_make_one_partition_per_balanced_slice(spark, tmp_path):
    """binary_files with sizes: one partition per balanced slice, heaviest first, every path once; without sizes
    the paths keep their order."""
    from audit.sources.logdirs import binary_files, balanced_slices

    uris = [(tmp_path / f"f{i}").as_uri() for i in range(50)]
    sizes = [(i * 37) % 23 + 15 for i in range(50)]
    parts = binary_files(spark, uris, sizes).rdd.glom().collect()
    cores = spark.sparkContext.defaultParallelism
    assert len(parts) == min(50, 4 * cores)
    assert [[r.path for r in p] for p in parts] == [[uris[i] for i in g] for g in balanced_slices(sizes, len(parts))]
    totals = [sum(sizes[uris.index(r.path)] for r in p) for p in parts]
    assert max(totals) - min(totals) <= max(sizes), totals
    assert [r.path for p in binary_files(spark, uris).rdd.glom().collect() for r in p] == uris


@pytest.mark.slow
def test_large_input_reads_the_metadata_log_with_small_table_settings(spark, monkeypatch):
    """A large input's log-dir read: the partition-state tables (bounds here) are built with the small-table
    settings, the segments' decode with the input's own (four slices per core), and the session's values are
    back afterwards; nothing changes for tables of SMALL_TABLE_ROWS rows or more."""
    import glob

    from audit.sources import logdirs
    from audit.sources.logdirs import kraft_metadata, reader, small_files
    from audit.spark import SMALL_TABLE_ROWS, small_settings, small_tables
    from tests.paths import SCENARIO

    seen = {}
    bounds, binary = reader.partition_bounds, reader.binary_files

    def spy_bounds(*a):
        seen["bounds"] = (spark.conf.get("spark.sql.adaptive.enabled"), spark.conf.get("spark.sql.shuffle.partitions"))
        return bounds(*a)

    def spy_binary(sp, uris, sizes=None):
        seen.setdefault("binary", []).append(
            (any("__consumer_offsets" in u and u.endswith(".log") for u in uris), small_settings(sp))
        )
        return binary(sp, uris, sizes)

    monkeypatch.setattr(reader, "partition_bounds", spy_bounds)
    for module in (small_files, kraft_metadata, reader):  # every module of read_log_dirs that reads files
        monkeypatch.setattr(module, "binary_files", spy_binary)
    before = {
        k: spark.conf.get(k, None)
        for k in (
            "spark.sql.adaptive.enabled",
            "spark.sql.shuffle.partitions",
            "spark.sql.codegen.factoryMode",
            "spark.koa.smallInput",
        )
    }
    assert not small_settings(spark)
    src = logdirs.read_log_dirs(spark, sorted(glob.glob(str(SCENARIO / "brokers" / "*"))), reduce_latest=True)
    assert seen["bounds"] == ("false", "1")
    # the small files and the metadata log: small-table settings; the decode of segments: the input's own
    assert seen["binary"][0][1] and seen["binary"][-1] == (True, False), seen["binary"]
    assert src.raw_offsets.count() > 0
    assert {k: spark.conf.get(k, None) for k in before} == before
    with small_tables(spark, SMALL_TABLE_ROWS):
        assert not small_settings(spark)
    with small_tables(spark, 10):
        assert small_settings(spark)
    assert not small_settings(spark)


def test_in_parallel_keeps_order_local_properties_and_errors(spark):
    """Threads of in_parallel see the caller's local properties (a job group or pool set by an embedding
    application covers their jobs); results come in order; an error is raised after all ended."""
    import warnings

    import pytest

    from audit.spark import in_parallel

    sc = spark.sparkContext
    sc.setLocalProperty("spark.scheduler.pool", "koa-test-pool")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # pyspark warns when a wrapper cannot inherit the session's tags
            got = in_parallel(lambda: sc.getLocalProperty("spark.scheduler.pool"), lambda: spark.range(5).count())
        assert got == ["koa-test-pool", 5]
        # nested, as the reports run theirs inside a thread of the pipeline's
        assert in_parallel(lambda: in_parallel(lambda: sc.getLocalProperty("spark.scheduler.pool"))) == [
            ["koa-test-pool"]
        ]
        ran = []

        def fails():
            raise ValueError("boom")

        with pytest.raises(ValueError, match="boom"):
            in_parallel(fails, lambda: ran.append(spark.range(2).count()))
        assert ran == [2]
    finally:
        sc.setLocalProperty("spark.scheduler.pool", None)


def test_checkpoint_on_first_use_runs_no_job_and_its_first_reader_keeps_the_rows(spark):
    """The checkpoint starts no Spark job; the first job that reads the table computes its rows, once; later queries
    read the kept rows (the counter of rows computed, in the Python worker, does not grow)."""
    from pyspark.sql import functions as F

    from audit.spark import checkpoint_on_first_use

    sc = spark.sparkContext
    computed = sc.accumulator(0)

    def count_rows(batches):
        for batch in batches:
            computed.add(batch.num_rows)
            yield batch

    df = spark.range(0, 10, numPartitions=2).mapInArrow(count_rows, "id long")
    jobs = set(sc.statusTracker().getJobIdsForGroup(None))
    kept = checkpoint_on_first_use(df)
    assert set(sc.statusTracker().getJobIdsForGroup(None)) == jobs and computed.value == 0
    assert sorted(r.id for r in kept.collect()) == list(range(10)) and computed.value == 10
    assert kept.where("id > 4").count() == 5 and kept.agg(F.sum("id")).first()[0] == 45
    assert computed.value == 10


def _zip_with(path, files: dict) -> str:
    import zipfile

    with zipfile.ZipFile(path, "w") as z:
        for name, text in files.items():
            z.writestr(name, text)
    return str(path)


def _worker_site_module():
    """audit/worker_site/sitecustomize.py loaded under another name (so its start-up work does not run)."""
    import importlib.util

    from audit.spark import WORKER_SITE

    spec = importlib.util.spec_from_file_location("koa_worker_site", os.path.join(WORKER_SITE, "sitecustomize.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_worker_site_moves_a_zip_only_when_the_same_version_is_installed(tmp_path):
    import pyspark

    prefer_installed = _worker_site_module().prefer_installed
    site = str(__import__("pathlib").Path(pyspark.__file__).parent.parent)
    same = _zip_with(tmp_path / "same.zip", {"pyspark/version.py": f'__version__: str = "{pyspark.__version__}"\n'})
    other = _zip_with(tmp_path / "other.zip", {"pyspark/version.py": '__version__: str = "3.0.0"\n'})
    unrelated = _zip_with(tmp_path / "unrelated.zip", {"something/__init__.py": ""})
    assert prefer_installed([same, "x", site]) == ["x", site, same]
    assert prefer_installed([other, "x", site]) == [other, "x", site]  # another version: the zip's stays
    assert prefer_installed([unrelated, site]) == [unrelated, site]
    assert prefer_installed([same, "x"]) == [same, "x"]  # not installed elsewhere


def test_python_workers_import_pyspark_from_the_installed_copy(spark):
    """Spark puts its pyspark.zip first on the workers' path; the start-up hook the session puts on the JVM's
    PYTHONPATH (audit/worker_site/sitecustomize.py) makes them import the installed pyspark, whose bytecode is
    cached."""
    import pyarrow as pa

    def where(batches):
        import sys

        import pyspark
        import pyspark.worker

        for _ in batches:
            yield pa.RecordBatch.from_pydict(
                {"f": [pyspark.worker.__file__], "zip_on_path": [any(p.endswith("pyspark.zip") for p in sys.path)]}
            )

    rows = spark.range(2, numPartitions=2).mapInArrow(where, "f string, zip_on_path boolean").collect()
    assert rows and all(".zip" not in r.f and r.f.endswith(".py") for r in rows)
    assert all(r.zip_on_path for r in rows)  # Spark's zip is still there, after the installed copy


def test_worker_site_runs_at_start_up_and_chains_to_the_next_sitecustomize(tmp_path):
    """A Python process started with WORKER_SITE on PYTHONPATH behind Spark's zip imports the installed pyspark
    (the zip, same version, moves last) and still runs the sitecustomize WORKER_SITE shadows; a zip of another
    version stays first."""
    import pyspark

    other = tmp_path / "other"
    other.mkdir()
    (other / "sitecustomize.py").write_text("import sys\nsys.koa_chained = True\n")
    probe = (
        "import sys, pyspark; print(pyspark.__file__); print(getattr(sys, 'koa_chained', False)); "
        "print([p for p in sys.path if p.endswith('.zip')][-1] == sys.path[-1])"
    )

    def run(version):
        z = tmp_path / version / "pyspark.zip"
        z.parent.mkdir()
        _zip_with(
            z,
            {
                "pyspark/version.py": f'__version__: str = "{version}"\n',
                "pyspark/__init__.py": "__file__ = 'from the zip'\n",
            },
        )
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(z), WORKER_SITE, str(other)]))
        out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True)
        return out.stdout.split()

    installed, chained, zip_last = run(pyspark.__version__)
    assert installed == pyspark.__file__ and chained == "True" and zip_last == "True"
    assert run("3.0.0")[:2] == ["from", "the"]  # another version: Spark's zip stays first


def test_worker_site_is_on_pythonpath_only_while_the_jvm_starts(monkeypatch):
    monkeypatch.setenv("PYTHONPATH", "/x")
    monkeypatch.delenv("KOA_WORKER_SITE", raising=False)
    with audit.spark.session._worker_site(True):
        assert os.environ["PYTHONPATH"] == WORKER_SITE + os.pathsep + "/x"
    assert os.environ["PYTHONPATH"] == "/x"
    with audit.spark.session._worker_site(False):
        assert os.environ["PYTHONPATH"] == "/x"
    monkeypatch.delenv("PYTHONPATH")
    with audit.spark.session._worker_site(True):
        assert os.environ["PYTHONPATH"] == WORKER_SITE
    assert "PYTHONPATH" not in os.environ
    monkeypatch.setenv("KOA_WORKER_SITE", "off")
    with audit.spark.session._worker_site(True):
        assert "PYTHONPATH" not in os.environ


def test_python_data_source_planners_import_pyspark_from_the_installed_copy(spark):
    """A Python data source's planner processes (create_data_source, plan_data_source_read), which Spark starts
    through pyspark.daemon whatever spark.python.daemon.module says, get the same start-up hook: the pyspark
    each of them imports is the installed copy, not Spark's zip."""
    from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

    class Reader(DataSourceReader):
        def __init__(self, created):
            self.created = created

        def partitions(self):
            import pyspark

            return [InputPartition(pyspark.__file__)]

        def read(self, partition):
            import pyspark

            yield (self.created, partition.value, pyspark.__file__)

    class Probe(DataSource):
        def __init__(self, options):
            super().__init__(options)
            import pyspark

            self.created = pyspark.__file__

        @classmethod
        def name(cls):
            return "koa_worker_site_probe"

        def schema(self):
            return "created string, planned string, read string"

        def reader(self, schema):
            return Reader(self.created)

    spark.dataSource.register(Probe)
    rows = spark.read.format("koa_worker_site_probe").load().collect()
    assert len(rows) == 1
    assert all(".zip" not in f and f.endswith("__init__.py") for f in rows[0]), rows[0]


def test_parse_ahead_parses_every_query_of_sql_and_swallows_parser_errors():
    """audit.queries.parse_ahead hands each sql/*.sql text (history placeholder filled) to the session's parser, in
    a daemon thread; a parser that fails leaves the thread ending quietly (the queries are parsed where they run)."""
    from importlib import resources

    from audit.queries import parse_ahead

    seen = []

    class Parser:
        def __init__(self, fail):
            self.fail = fail

        def parsePlan(self, text):
            if self.fail:
                raise RuntimeError("no such entry point")
            seen.append(text)

    class Fake:
        def __init__(self, fail=False):
            parser = Parser(fail)
            state = type("State", (), {"sqlParser": lambda self: parser})()
            self._jsparkSession = type("J", (), {"sessionState": lambda self: state})()

    t = parse_ahead(Fake())
    t.join(10)
    assert t.daemon and not t.is_alive()
    files = [f for f in resources.files("audit.sql").iterdir() if f.name.endswith(".sql")]
    assert len(files) >= 16 and len(seen) == len(files)
    from audit.queries import PARSE_FILL

    def filled(text):
        for placeholder, value in PARSE_FILL.items():
            text = text.replace(placeholder, value)
        return text

    assert sorted(seen) == sorted(filled(f.read_text()) for f in files)
    # every placeholder of every query is filled: the judge's and groups.sql's alike
    assert not any(p in s for s in seen for p in [*PARSE_FILL, "{as_of}", "{rule_order}", "{stale_after_seconds}"])
    t = parse_ahead(Fake(fail=True))
    t.join(10)
    assert not t.is_alive()


def test_dataframe_debugging_off_unless_the_user_set_it(spark, monkeypatch):
    """The session the audit builds has PySpark's DataFrame query context off, so a Column expression built in
    Python costs one py4j call, not about ten; a user's own setting is left alone."""
    from pyspark.sql import functions as F

    from audit.spark.session import DATAFRAME_DEBUGGING_CONF, _user_set

    assert spark.conf.get(DATAFRAME_DEBUGGING_CONF) == "false"
    import py4j.clientserver as cs

    calls = []
    real = cs.ClientServerConnection.send_command
    monkeypatch.setattr(
        cs.ClientServerConnection,
        "send_command",
        lambda self, command: calls.append(command[:1]) or real(self, command),
    )
    (F.col("a") + F.lit(1)).alias("b")
    monkeypatch.undo()
    # col, lit, plus, alias and their lookups: 13 calls; with the query context on (a session built without the
    # setting) the same expression takes 38
    assert len([c for c in calls if c != "m"]) <= 16, calls

    monkeypatch.setenv("PYSPARK_SUBMIT_ARGS", f"--conf {DATAFRAME_DEBUGGING_CONF}=true pyspark-shell")
    assert _user_set(DATAFRAME_DEBUGGING_CONF, launching=True)
    monkeypatch.setenv("PYSPARK_SUBMIT_ARGS", "--conf spark.driver.memory=1g pyspark-shell")
    assert not _user_set(DATAFRAME_DEBUGGING_CONF, launching=True)


def test_python_workers_decoders_do_not_import_kafka_python():
    """The modules a Python worker loads to decode segments and small files leave kafka-python's package (its
    clients: about 0.15 s per worker) unloaded until a snappy batch needs its codec."""
    import subprocess
    import sys

    code = (
        "import sys, audit.sources.logdirs, audit.formats.record_batch as rb, audit.formats.offsets, "
        "audit.formats.latest, audit.formats.metadata_log\n"
        "assert 'kafka' not in sys.modules, 'kafka imported'\n"
        "import snappy\n"
        "framed = b'\\x82SNAPPY\\x00' + b'\\x00\\x00\\x00\\x01\\x00\\x00\\x00\\x01' + len(c := snappy.compress(b'abc'))"
        ".to_bytes(4, 'big') + c\n"
        "assert bytes(rb.decompress(2, framed)) == b'abc'\n"
        "assert 'kafka' in sys.modules\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_caching_a_dataframe_plans_it_in_the_same_session(spark):
    """``cache()`` in the audit's session (the metadata log's records, the expectations' frames) does not clone it:
    through Spark Connect a clone copies the session's artifacts and unpacks the ``--python-env`` archive again."""
    df = spark.range(5).selectExpr("id", "id * 2 AS twice")
    df.cache()
    try:
        assert df.count() == 5
        cached = spark._jsparkSession.sharedState().cacheManager().lookupCachedData(df._jdf)
        assert cached.isDefined()
        planned_in = cached.get().cachedRepresentation().cacheBuilder().cachedPlan().session()
        assert planned_in.equals(spark._jsparkSession)
    finally:
        df.unpersist()


def _fake_session(module: str, stop):
    cls = type("SparkSession", (), {"__module__": module, "stop": lambda self: stop()})
    return cls()


def test_release_remote_session_stops_connect_sessions_only_and_never_waits_long():
    """A Connect session is stopped (its server releases it); a session with a driver JVM here is left alone; a
    server that does not answer holds the caller for the timeout, not for gRPC's retries."""
    import threading
    import time

    calls = []
    local = _fake_session("pyspark.sql.session", lambda: calls.append("local"))
    assert audit.spark.release_remote_session(local) is False and calls == []

    remote = _fake_session("pyspark.sql.connect.session", lambda: calls.append("remote"))
    assert audit.spark.release_remote_session(remote) is True and calls == ["remote"]

    def refused():
        raise RuntimeError("UNAVAILABLE")

    assert audit.spark.release_remote_session(_fake_session("pyspark.sql.connect.session", refused)) is False

    hung = threading.Event()
    stuck = _fake_session("pyspark.sql.connect.session", lambda: hung.wait(30))
    t = time.monotonic()
    assert audit.spark.release_remote_session(stuck, timeout=0.3) is False
    assert time.monotonic() - t < 5
    hung.set()
