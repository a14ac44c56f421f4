"""Spark 4 Python data source ``kafka_offsets_topic``: the live ``__consumer_offsets`` topic.

Reads the records of ``__consumer_offsets`` read-only - no group, partitions
named explicitly, nothing ever committed - under ``read_committed`` so that
offsets written in aborted transactions (TxnOffsetCommit, KIP-98) and the
transaction control batches are dropped exactly as Kafka's own readers drop
them.  Two engines:

* ``fetch`` (the default): Fetch requests to each partition's leader, the
  response's record batches decoded vectorised by the segment decoder
  (:mod:`audit.sources.fetch`, :mod:`audit.formats.fetched`); rows reach Spark
  as Arrow record batches;
* ``consumer``: kafka-python's ``KafkaConsumer`` (``group_id=None``,
  ``enable_auto_commit=False``, ``isolation_level='read_committed'``), record by
  record; used when ``consumer.factory`` replaces it (tests, other clients).

Planning (``reader.partitions()``) captures, per ``__consumer_offsets``
partition, the log start offset (ListOffsets EARLIEST) and the read_committed
end offset (ListOffsets LATEST = last stable offset); every Spark task then
reads its partitions from that start up to (excluding) that end, so the result
is a consistent snapshot no matter how long the job runs.  The non-empty
partitions are spread over at most ``tasks`` Spark tasks (balanced by record
count), each reading its partitions with one consumer: a consumer costs a
bootstrap, a Metadata round and kafka-python's ``retry_backoff_ms`` wait before
its first Fetch (about 0.2 s on a local cluster), whatever it reads.

Rows (``SCHEMA``): ``source_partition int, source_offset bigint,
timestamp bigint (ms since epoch, the record timestamp), key binary,
value binary (null for tombstones)``.  With ``decoded=true`` the rows are
:data:`audit.formats.segments.RAW_SCHEMA` instead (keys and values decoded by
:mod:`audit.formats.offsets` in the same task; what the audit reads).

Usage::

    from audit.sources.kafka_datasource import register
    register(spark)                                   # real kafka-python consumer
    df = (spark.read.format("kafka_offsets_topic")
          .option("bootstrap.servers", "b1:9092,b2:9092")
          .option("client.properties", "/etc/kafka/audit.properties")
          .option("kafka.client.id", "offset-audit")  # any client property, prefixed
          .option("poll.timeout.ms", "30000")
          .load())

Options: ``bootstrap.servers``; ``client.properties`` (path to a Kafka client
``.properties`` file, parsed by :mod:`audit.sources.client_config`);
``kafka.<property>`` (one client property, overrides the file);
``poll.timeout.ms`` (how long a task may wait without progress before it
fails, default 30000); ``engine`` (``fetch`` or ``consumer``); ``decoded``
(``true``/``false``, default false); ``latest`` (``true``/``false``, default false: with ``decoded``,
``--mode latest``'s per-partition summary in the task); ``tasks`` (the most Spark tasks to read with, default
one per non-empty partition; :func:`audit.sources.cluster.read_offsets_topic`
passes the session's default parallelism); ``topic`` (default ``__consumer_offsets``, e.g. for a
mirrored copy); ``consumer.factory`` (``module:callable`` used instead of
``kafka.KafkaConsumer``).  Any other option is an error naming it.  Secrets
never appear in error messages (:func:`audit.sources.client_config.redact`).

This module holds the data source, its options (:func:`reader_from_options`) and
its registration; the reader is :mod:`audit.sources.offsets_topic_reader`, the
plan's ranges and tasks :mod:`audit.sources.offsets_topic_plan`.  Their public
names are importable from here too.
"""

from __future__ import annotations

import importlib
from typing import Any, Callable, Mapping

from pyspark.sql.datasource import DataSource

from .client_config import ClientConfigError, parse_client_properties, parse_properties
from .offsets_topic_plan import KafkaOffsetsTopicError, OffsetsTopicPartition, OffsetsTopicTask, spread
from .offsets_topic_reader import (
    DECODE_BATCH_ROWS,
    DEFAULT_POLL_TIMEOUT_MS,
    ENGINES,
    OFFSETS_TOPIC,
    KafkaOffsetsTopicReader,
    consumer_settings,
)

__all__ = [
    "DECODE_BATCH_ROWS",
    "DEFAULT_POLL_TIMEOUT_MS",
    "ENGINES",
    "OFFSETS_TOPIC",
    "SCHEMA",
    "SHORT_NAME",
    "KafkaOffsetsTopicDataSource",
    "KafkaOffsetsTopicError",
    "KafkaOffsetsTopicReader",
    "OffsetsTopicPartition",
    "OffsetsTopicTask",
    "consumer_settings",
    "reader_from_options",
    "register",
    "spread",
    "with_consumer_factory",
]

SHORT_NAME = "kafka_offsets_topic"
#: Output schema (Spark DDL).
SCHEMA = "source_partition int, source_offset bigint, timestamp bigint, key binary, value binary"

_KNOWN_OPTIONS = {
    "bootstrap.servers",
    "client.properties",
    "poll.timeout.ms",
    "topic",
    "consumer.factory",
    "path",
    "tasks",
    "engine",
    "decoded",
    "latest",
}


def _load_factory(spec: str) -> Callable[..., Any]:
    module, _, attr = spec.partition(":")
    if not module or not attr:
        raise KafkaOffsetsTopicError(f"option consumer.factory={spec!r}: expected 'module:callable'")
    try:
        return getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as exc:
        raise KafkaOffsetsTopicError(f"option consumer.factory={spec!r}: {exc}") from None


def _read_properties(path: str) -> dict[str, str]:
    try:
        with open(path, encoding="utf-8") as fh:
            return parse_properties(fh.read())
    except OSError as exc:
        raise ClientConfigError(f"cannot read client properties {path}: {exc.strerror}") from None


def reader_from_options(
    options: Mapping[str, str], factory: Callable[..., Any] | None = None
) -> KafkaOffsetsTopicReader:
    """Build the reader from data-source options (see the module docstring).

    Raises
    ------
    KafkaOffsetsTopicError
        Unknown option (named), bad ``poll.timeout.ms``, missing ``bootstrap.servers``, or a client-configuration
        error (message redacted).
    """
    opts = {str(k).lower(): str(v) for k, v in dict(options).items()}
    unknown = sorted(k for k in opts if k not in _KNOWN_OPTIONS and not k.startswith("kafka."))
    if unknown:
        raise KafkaOffsetsTopicError(
            f"unknown option(s) {', '.join(unknown)} for data source {SHORT_NAME}; known: "
            f"{', '.join(sorted(_KNOWN_OPTIONS - {'path'}))}, kafka.<client property>"
        )
    try:
        props: dict[str, str] = {}
        source = None
        if "client.properties" in opts:
            source = opts["client.properties"]
            props.update(_read_properties(source))
        inline = {k[len("kafka.") :]: v for k, v in opts.items() if k.startswith("kafka.")}
        if inline:
            props.update(inline)
            source = f"{source} + kafka.* options" if source else "kafka.* options"
        config = parse_client_properties(props, source=source)
    except ClientConfigError as exc:
        raise KafkaOffsetsTopicError(f"client configuration: {exc}") from None
    if "bootstrap.servers" in opts:
        servers = [s.strip() for s in opts["bootstrap.servers"].split(",") if s.strip()]
        config = config.with_overrides(bootstrap_servers=servers)
    if not config.bootstrap_servers:
        raise KafkaOffsetsTopicError(
            f"data source {SHORT_NAME} needs the option bootstrap.servers (or bootstrap.servers in client.properties)"
        )
    try:
        poll_timeout_ms = int(opts.get("poll.timeout.ms", DEFAULT_POLL_TIMEOUT_MS))
        if poll_timeout_ms <= 0:
            raise ValueError
    except ValueError:
        raise KafkaOffsetsTopicError(
            f"option poll.timeout.ms={opts.get('poll.timeout.ms')!r}: expected a positive integer (ms)"
        ) from None
    tasks = None
    if "tasks" in opts:
        try:
            tasks = int(opts["tasks"])
            if tasks <= 0:
                raise ValueError
        except ValueError:
            raise KafkaOffsetsTopicError(f"option tasks={opts['tasks']!r}: expected a positive integer") from None
    if "consumer.factory" in opts:
        factory = _load_factory(opts["consumer.factory"])
    decoded = opts.get("decoded", "false").strip().lower()
    latest = opts.get("latest", "false").strip().lower()
    for name, value in (("decoded", decoded), ("latest", latest)):
        if value not in ("true", "false"):
            raise KafkaOffsetsTopicError(f"option {name}={opts[name]!r}: expected true or false")
    engine = opts.get("engine")
    if engine is not None and engine.strip().lower() not in ENGINES:
        raise KafkaOffsetsTopicError(f"option engine={engine!r}: expected one of {', '.join(ENGINES)}")
    return KafkaOffsetsTopicReader(
        config,
        opts.get("topic", OFFSETS_TOPIC),
        poll_timeout_ms,
        factory,
        tasks,
        engine.strip().lower() if engine else None,
        decoded == "true",
        latest == "true",
    )


class KafkaOffsetsTopicDataSource(DataSource):
    """``spark.read.format("kafka_offsets_topic")``: raw ``__consumer_offsets`` records (schema :data:`SCHEMA`).

    See the module docstring for options.

    ``consumer_factory`` (class attribute) replaces ``kafka.KafkaConsumer``;
    use :func:`with_consumer_factory` to make a subclass with another one.
    """

    consumer_factory: Callable[..., Any] | None = None

    @classmethod
    def name(cls) -> str:
        return SHORT_NAME

    def schema(self) -> Any:
        if str(dict(self.options).get("decoded", "false")).strip().lower() == "true":
            from ..formats.segments import RAW_SCHEMA
            from .logdirs import spark_schema

            return spark_schema(RAW_SCHEMA)
        return SCHEMA

    def reader(self, schema: Any) -> KafkaOffsetsTopicReader:
        factory = type(self).consumer_factory
        return reader_from_options(self.options, factory)


def with_consumer_factory(factory: Callable[..., Any]) -> type[KafkaOffsetsTopicDataSource]:
    """Make a :class:`KafkaOffsetsTopicDataSource` subclass (same short name) with another consumer factory.

    Its consumers come from ``factory(**kafka_python_settings)`` - for tests and for alternative clients.
    ``factory`` must be picklable (Spark ships it to executors).
    """
    return type(
        "KafkaOffsetsTopicDataSource",
        (KafkaOffsetsTopicDataSource,),
        {"consumer_factory": staticmethod(factory), "__module__": __name__},
    )


def register(spark: Any, consumer_factory: Callable[..., Any] | None = None) -> type[KafkaOffsetsTopicDataSource]:
    """Register the data source under ``kafka_offsets_topic`` on ``spark`` and return the class."""
    cls = with_consumer_factory(consumer_factory) if consumer_factory else KafkaOffsetsTopicDataSource
    spark.dataSource.register(cls)
    return cls
