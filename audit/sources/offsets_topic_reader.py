"""The ``kafka_offsets_topic`` data source's reader: planning and reading ``__consumer_offsets`` read-only.

:class:`KafkaOffsetsTopicReader` plans (each partition's log start and read_committed end, spread over the tasks)
and reads each task's ranges with the ``fetch`` engine (:mod:`audit.sources.fetch`) or the ``consumer`` engine
(kafka-python's ``KafkaConsumer``, or a replacement; :func:`consumer_settings` forces it read-only); errors name
the stage, the partitions and the redacted client configuration.  :mod:`audit.sources.kafka_datasource` describes
the data source and its options.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Generator, Iterator

from pyspark.sql.datasource import DataSourceReader

from .client_settings import ClientConfig
from .offsets_topic_plan import KafkaOffsetsTopicError, OffsetsTopicPartition, OffsetsTopicTask, spread
from .redaction import redact

__all__ = [
    "DECODE_BATCH_ROWS",
    "DEFAULT_POLL_TIMEOUT_MS",
    "ENGINES",
    "OFFSETS_TOPIC",
    "KafkaOffsetsTopicReader",
    "consumer_settings",
]

OFFSETS_TOPIC = "__consumer_offsets"
DEFAULT_POLL_TIMEOUT_MS = 30_000
_POLL_SLICE_MS = 1_000
ENGINES = ("fetch", "consumer")


def consumer_settings(client_config: ClientConfig) -> dict[str, Any]:
    """kafka-python ``KafkaConsumer`` keyword settings for a read-only reader.

    The client configuration's connection/security settings are kept; the
    auditor forces ``group_id=None``, ``enable_auto_commit=False``,
    ``isolation_level='read_committed'``, ``auto_offset_reset='earliest'``,
    ``allow_auto_create_topics=False`` and raw-bytes keys/values.
    """
    kw = client_config.consumer_kwargs()
    kw.update(
        group_id=None,
        enable_auto_commit=False,
        isolation_level="read_committed",
        auto_offset_reset="earliest",
        allow_auto_create_topics=False,
        key_deserializer=None,
        value_deserializer=None,
    )
    kw.setdefault("client_id", "kafka-offset-audit")
    return kw


def _default_consumer_factory(**settings: Any) -> Any:
    from kafka import KafkaConsumer

    return KafkaConsumer(**settings)


def _partitions_for_topic(consumer: Any, topic: str) -> Any:
    """``consumer.partitions_for_topic(topic)`` without asking the cluster for every topic.

    kafka-python's ``KafkaConsumer.partitions_for_topic`` falls back to a Metadata request for *all*
    topics when the topic is not cached yet (``_fetch_all_topic_metadata``): on a cluster with many
    topics that is the request KIP-526 is about, and it needs DESCRIBE on every topic to be complete.
    With a real KafkaConsumer (kafka-python 3.0), the topic is first added to the tracked topics and
    a Metadata request naming only the tracked topics is awaited; other consumers (tests' fakes) are
    asked directly.
    """
    cluster, net, manager = (getattr(consumer, a, None) for a in ("_cluster", "_net", "_manager"))
    if cluster is not None and net is not None and manager is not None and hasattr(cluster, "add_topic"):
        for _ in range(2):  # a refresh already in flight may not name the topic: then one more
            if cluster.partitions_for_topic(topic) is not None:
                break
            if cluster.metadata_refresh_in_progress:
                net.run(manager.wait_for, cluster.request_update(), None)
            net.run(manager.wait_for, cluster.add_topic(topic), None)
            if cluster.partitions_for_topic(topic) is None and topic in getattr(cluster, "_topics", ()):
                net.run(manager.wait_for, cluster.request_update(), None)
    return consumer.partitions_for_topic(topic)


def _close(consumer: Any) -> None:
    try:
        consumer.close(autocommit=False)
    except TypeError:
        consumer.close()


class KafkaOffsetsTopicReader(DataSourceReader):
    """Batch reader; see :mod:`audit.sources.kafka_datasource`.

    Parameters
    ----------
    client_config : ClientConfig
        Parsed client configuration (must carry bootstrap servers).
    topic : str, default OFFSETS_TOPIC
        The offsets topic (``__consumer_offsets``).
    poll_timeout_ms : int, default DEFAULT_POLL_TIMEOUT_MS
        Longest wait without progress in a task, ms.
    consumer_factory : callable, optional
        ``factory(**kafka_python_settings) -> consumer`` with KafkaConsumer's ``partitions_for_topic``,
        ``beginning_offsets``, ``end_offsets``, ``assign``, ``seek``, ``poll``, ``position``, ``close`` (and
        ``pause``, used when there).
    tasks : int, optional
        The most Spark tasks to read with (None: one per non-empty partition).
    engine : str, optional
        ``fetch`` (Fetch requests, vectorised decoding; the default without a ``consumer_factory``) or ``consumer``
        (kafka-python's consumer, or ``consumer_factory``'s).
    decoded : bool, default False
        Yield :data:`audit.formats.segments.RAW_SCHEMA` Arrow batches instead of
        :data:`audit.sources.kafka_datasource.SCHEMA` rows.
    latest : bool, default False
        (``fetch`` engine, ``decoded``) ``--mode latest``: each partition's records summarised before they leave the
        task (:func:`audit.sources.fetch.read_ranges`), ``kind='count'`` rows for those folded away.
    """

    def __init__(
        self,
        client_config: ClientConfig,
        topic: str = OFFSETS_TOPIC,
        poll_timeout_ms: int = DEFAULT_POLL_TIMEOUT_MS,
        consumer_factory: Callable[..., Any] | None = None,
        tasks: int | None = None,
        engine: str | None = None,
        decoded: bool = False,
        latest: bool = False,
    ):
        self.client_config = client_config
        self.topic = topic
        self.poll_timeout_ms = int(poll_timeout_ms)
        self.consumer_factory = consumer_factory or _default_consumer_factory
        self.tasks = tasks
        self.engine = engine or ("consumer" if consumer_factory is not None else "fetch")
        if self.engine not in ENGINES:
            raise KafkaOffsetsTopicError(f"option engine={engine!r}: expected one of {', '.join(ENGINES)}")
        self.decoded = bool(decoded)
        self.latest = bool(latest) and self.decoded

    # -- helpers

    def _where(self) -> str:
        servers = ",".join(self.client_config.bootstrap_servers or [])
        return f"bootstrap.servers={servers}; client config {self.client_config.redacted()}"

    def _fail(self, stage: str, partitions: list[int] | None, exc: BaseException) -> KafkaOffsetsTopicError:
        import kafka.errors as Errors

        tp = self.topic if partitions is None else ", ".join(f"{self.topic}-{p}" for p in partitions)
        if isinstance(exc, Errors.TopicAuthorizationFailedError):
            hint = f"TOPIC_AUTHORIZATION_FAILED: the client principal needs READ and DESCRIBE on Topic:{self.topic}"
        elif isinstance(exc, Errors.GroupAuthorizationFailedError):
            hint = "GROUP_AUTHORIZATION_FAILED: the reader uses no group; check the client configuration"
        elif isinstance(
            exc, (Errors.SaslAuthenticationFailedError, Errors.UnsupportedSaslMechanismError)
        ) or "CERTIFICATE_VERIFY_FAILED" in str(exc):
            hint = "authentication failed; check security.protocol, sasl.jaas.config and ssl.* settings"
        elif isinstance(exc, (Errors.KafkaTimeoutError, Errors.KafkaConnectionError, Errors.NodeNotReadyError)):
            hint = "no broker reachable"
        else:
            hint = ""
        message = f"{stage} {tp} failed: {redact(exc)}"
        if hint:
            message += f" ({hint})"
        return KafkaOffsetsTopicError(f"{message}; {self._where()}")

    def _consumer(self, stage: str, partitions: list[int] | None) -> Any:
        try:
            return self.consumer_factory(**consumer_settings(self.client_config))
        except Exception as exc:  # noqa: BLE001
            raise self._fail(stage, partitions, exc) from None

    # -- planning

    def partitions(self) -> list[OffsetsTopicTask]:
        """Return the Spark input partitions: :meth:`ranges` spread over at most ``tasks`` tasks (:func:`spread`).

        Raises
        ------
        KafkaOffsetsTopicError
            As :meth:`ranges`.
        """
        return spread(self.ranges(), self.tasks)

    def ranges(self) -> list[OffsetsTopicPartition]:
        """Return every offsets-topic partition, with its ``[log start, read_committed end)`` captured now.

        The bounds are ListOffsets EARLIEST / LATEST under read_committed, i.e. the last stable offset.

        Raises
        ------
        KafkaOffsetsTopicError
            Topic missing/unauthorized, brokers unreachable.
        """
        from kafka.structs import TopicPartition

        consumer = self._consumer("planning: connect for", None)
        try:
            ids = _partitions_for_topic(consumer, self.topic)
            if not ids:
                raise KafkaOffsetsTopicError(
                    f"planning: topic {self.topic} not found (or the principal lacks DESCRIBE on it); {self._where()}"
                )
            tps = [TopicPartition(self.topic, p) for p in sorted(ids)]
            starts = consumer.beginning_offsets(tps)
            ends = consumer.end_offsets(tps)
        except KafkaOffsetsTopicError:
            raise
        except Exception as exc:  # noqa: BLE001
            raise self._fail("planning: list offsets of", None, exc) from None
        finally:
            _close(consumer)
        return [OffsetsTopicPartition(tp.partition, starts[tp], ends[tp]) for tp in tps]

    # -- reading

    def read(self, partition: OffsetsTopicTask | OffsetsTopicPartition) -> Iterator[Any]:  # type: ignore[override]
        """Read every committed record with ``start_offset <= offset < end_offset`` of each range of ``partition``.

        The ``fetch`` engine yields Arrow record batches (:data:`audit.sources.kafka_datasource.SCHEMA` columns, or ``RAW_SCHEMA`` when
        ``decoded``); the ``consumer`` engine yields ``(source_partition, source_offset, timestamp_ms, key, value)``
        tuples (Arrow ``RAW_SCHEMA`` batches when ``decoded``).

        Raises
        ------
        KafkaOffsetsTopicError
            As :meth:`read_records`; for the ``fetch`` engine, also a Fetch error that is not retriable (named
            partitions, redacted configuration).
        """
        ranges = [r for r in getattr(partition, "ranges", [partition]) if r.end_offset > r.start_offset]
        if self.engine == "fetch":
            from .fetch import read_ranges

            yield from read_ranges(
                self.client_config,
                self.topic,
                [(r.partition, r.start_offset, r.end_offset) for r in ranges],
                poll_timeout_ms=self.poll_timeout_ms,
                decoded=self.decoded,
                fail=self._fail,
                reduce_latest=self.latest,
            )
        elif self.decoded:
            yield from _decoded_batches(self.read_records(partition))
        else:
            yield from self.read_records(partition)

    def read_records(self, partition: OffsetsTopicTask | OffsetsTopicPartition) -> Iterator[tuple]:
        """Yield every committed record of each range of ``partition`` with the ``consumer`` engine.

        Each record is a ``(source_partition, source_offset, timestamp_ms, key, value)`` tuple with
        ``start_offset <= offset < end_offset``; all are read with one consumer (a partition that reaches its end is
        paused).

        Raises
        ------
        KafkaOffsetsTopicError
            No partition made progress for ``poll.timeout.ms`` (the message names those left and their positions), or
            any consumer failure (named partitions, redacted configuration).
        """
        ranges = [r for r in getattr(partition, "ranges", [partition]) if r.end_offset > r.start_offset]
        if not ranges:
            return
        from kafka.structs import TopicPartition

        pending = {TopicPartition(self.topic, r.partition): r for r in ranges}
        names = [r.partition for r in ranges]
        consumer = self._consumer("read: connect for", names)
        pause = getattr(consumer, "pause", None)

        def finish(tp):
            del pending[tp]
            if pause is not None and pending:
                pause(tp)

        try:
            try:
                consumer.assign(list(pending))
                for tp, r in pending.items():
                    consumer.seek(tp, r.start_offset)
            except Exception as exc:  # noqa: BLE001
                raise self._fail("read: assign/seek", names, exc) from None
            last_progress = time.monotonic()
            while pending:
                try:
                    positions = {tp: consumer.position(tp) for tp in pending}
                    for tp, position in positions.items():
                        if position is not None and position >= pending[tp].end_offset:
                            finish(tp)
                    if not pending:
                        break
                    batch = consumer.poll(timeout_ms=min(_POLL_SLICE_MS, self.poll_timeout_ms))
                    moved = any(consumer.position(tp) != positions[tp] for tp in pending)
                except Exception as exc:  # noqa: BLE001
                    raise self._fail("read: poll", sorted(tp.partition for tp in pending), exc) from None
                got = yield from _polled_rows(batch, pending, finish)
                if got or moved:
                    last_progress = time.monotonic()
                elif (time.monotonic() - last_progress) * 1000 >= self.poll_timeout_ms:
                    raise self._no_progress(pending, positions)
        finally:
            _close(consumer)

    def _no_progress(self, pending: dict, positions: dict) -> KafkaOffsetsTopicError:
        """Build the error naming the ``pending`` partitions when none moved for ``poll.timeout.ms``.

        It names the partitions (``TopicPartition -> range``) and their ``positions``.
        """
        left = "; ".join(
            f"{self.topic}-{tp.partition} at offset {positions.get(tp)} (planned end {r.end_offset})"
            for tp, r in sorted(pending.items(), key=lambda kv: kv[1].partition)
        )
        return KafkaOffsetsTopicError(f"read: no progress for {self.poll_timeout_ms} ms: {left}; {self._where()}")


def _polled_rows(batch: dict | None, pending: dict, finish: Callable[[Any], None]) -> Generator[tuple, None, bool]:
    """Yield the records of one ``poll`` answer ``batch`` within the ``pending`` ranges.

    Each is ``(source_partition, source_offset, timestamp_ms, key, value)``; ``finish(tp)`` is called at a
    range's end.  Returns whether any record was yielded.
    """
    got = False
    for tp, records in (batch or {}).items():
        r = pending.get(tp)
        if r is None:
            continue
        p = r.partition
        for record in records:
            offset = record.offset
            if offset < r.start_offset:
                continue
            if offset >= r.end_offset:
                finish(tp)
                break
            got = True
            key = record.key
            value = record.value
            yield (
                p,
                int(offset),
                int(record.timestamp),
                bytes(key) if key is not None else None,
                bytes(value) if value is not None else None,
            )
    return got


#: records per Arrow batch the ``consumer`` engine decodes at once when ``decoded``
DECODE_BATCH_ROWS = 10_000


def _decoded_batches(records: Iterator[tuple]) -> Iterator[Any]:
    import pyarrow as pa

    from ..formats.fetched import RECORDS_SCHEMA
    from ..formats.segments import decode_offsets_rows

    buf: list[tuple] = []

    def flush():
        cols = [pa.array(c, f.type) for c, f in zip(zip(*buf), RECORDS_SCHEMA)]
        return decode_offsets_rows(pa.RecordBatch.from_arrays(cols, schema=RECORDS_SCHEMA))

    for rec in records:
        buf.append(rec)
        if len(buf) >= DECODE_BATCH_ROWS:
            yield flush()
            buf = []
    if buf:
        yield flush()
