"""Read planned ranges of ``__consumer_offsets`` with Fetch requests, decoded vectorised (one Spark task's read).

The ``kafka_offsets_topic`` data source's default engine (:mod:`audit.sources.kafka_datasource`).  A task sends
``Fetch`` requests (API key 1, v4-v12, ``isolation_level = READ_COMMITTED``, no fetch session, no group: the
read-only shape of Kafka's own consumer with ``group.id`` unset) to the leader of each of its partitions, all of
a leader's partitions in one request, every leader at once, and decodes each partition's ``Records`` bytes with
the segment decoder (:func:`audit.formats.fetched.decode_fetched`): no per-record Python object, the same code
that reads the log dirs.  Kafka's consumer is followed where it matters (``org.apache.kafka.clients.consumer.
internals.AbstractFetch``/``CompletedFetch``): ``current_leader_epoch`` from metadata (KIP-320 fencing), a
metadata refresh on ``NOT_LEADER_OR_FOLLOWER``/``FENCED_LEADER_EPOCH``/``UNKNOWN_LEADER_EPOCH``/
``UNKNOWN_TOPIC_OR_PARTITION``/``KAFKA_STORAGE_ERROR`` and other retriable errors, ``throttle_time_ms`` honoured
before the next request to that broker (KIP-219: a client quota slows the read, never fails it).

Sizes: ``fetch.max.bytes`` (default 52428800) per request, ``max.partition.fetch.bytes`` (default 1048576) per
partition, ``fetch.max.wait.ms`` (default 500), ``fetch.min.bytes`` (default 1), ``check.crcs`` (default true):
the Java client's properties and defaults, from the client configuration.

A partition whose log start moves past the position during the read (retention, ``DeleteRecords``) continues
from the new log start (the records before it are gone, as a consumer with ``auto.offset.reset=earliest``
would find); one whose log end falls below the planned end (an unclean election truncated it mid-read) ends
there.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Iterator

import pyarrow as pa

from ..formats.fetched import FetchedChunk, PreparedChunk, decode_prepared, prepare_fetched
from .client_config import ClientConfig, redact

log = logging.getLogger(__name__)

__all__ = ["FetchSettings", "read_ranges"]

NONE, OFFSET_OUT_OF_RANGE, TOPIC_AUTHORIZATION_FAILED = 0, 1, 29
#: partition errors after which the leader is looked up again (``AbstractFetch.handleInitializeErrors``)
REFRESH_METADATA = {3, 6, 9, 56, 74, 75}  # UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER,
# REPLICA_NOT_AVAILABLE, KAFKA_STORAGE_ERROR, FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH
READ_COMMITTED = 1
#: raw record bytes a task holds before decoding when it summarises (``reduce_latest``), and the most of one
#: partition: a key's records are all in one partition, so a partition held whole folds to a few rows per key.
#: Decoding takes a few times the bytes decoded (measured, a 20M-record live audit's Python worker: 845 MiB
#: holding 128 MiB over 25 partitions at once; 450 MiB holding 64 MiB, 4 partitions at a time; 300 MiB with these
#: values, 2 at a time, and no slower)
HOLD_BYTES = 32 << 20
PARTITION_HOLD_BYTES = 16 << 20


class FetchSettings:
    """The fetch sizes of a client configuration (the Java client's defaults where unset)."""

    def __init__(self, client_config: ClientConfig):
        s = client_config.settings
        self.max_bytes = int(s.get("fetch_max_bytes", 52_428_800))
        self.partition_max_bytes = int(s.get("max_partition_fetch_bytes", 1_048_576))
        self.max_wait_ms = int(s.get("fetch_max_wait_ms", 500))
        self.min_bytes = int(s.get("fetch_min_bytes", 1))
        self.check_crcs = bool(s.get("check_crcs", True))
        # a response may pass fetch.max.bytes by up to one partition's share (KIP-74: the first batch always comes
        # whole); the frame guard follows, as kafka-python's consumer sets it (KafkaConsumer.__init__)
        self.receive_max_bytes = max(
            int(s.get("receive_message_max_bytes", 100_000_000)), self.max_bytes + self.partition_max_bytes
        )


def _fetch_request(topic: str, parts: list[tuple[int, int, int]], cfg: FetchSettings) -> Any:
    """One Fetch request for ``(partition, fetch_offset, current_leader_epoch)`` of ``topic``."""
    from kafka.protocol.consumer import FetchRequest

    return FetchRequest(
        replica_id=-1,
        max_wait_ms=cfg.max_wait_ms,
        min_bytes=cfg.min_bytes,
        max_bytes=cfg.max_bytes,
        isolation_level=READ_COMMITTED,
        session_id=0,
        session_epoch=-1,  # FINAL_EPOCH: a full fetch, no incremental session kept on the broker
        topics=[
            FetchRequest.FetchTopic(
                topic=topic,
                partitions=[
                    FetchRequest.FetchTopic.FetchPartition(
                        partition=p,
                        current_leader_epoch=epoch,
                        fetch_offset=offset,
                        last_fetched_epoch=-1,
                        log_start_offset=-1,
                        partition_max_bytes=cfg.partition_max_bytes,
                    )
                    for p, offset, epoch in parts
                ],
            )
        ],
        forgotten_topics_data=[],
        rack_id="",
        min_version=4,  # read_committed needs v4 (KIP-98); Kafka 4.0 removed v0-v3 (KIP-896)
        max_version=12,  # v13+ name topics by id
    )


def read_ranges(
    client_config: ClientConfig,
    topic: str,
    ranges: list[tuple[int, int, int]],
    *,
    poll_timeout_ms: int,
    decoded: bool,
    fail: Any,
    reduce_latest: bool = False,
) -> Iterator[pa.RecordBatch]:
    """Read every committed record of ``topic`` in the ``(partition, start, end)`` ranges into Arrow batches.

    The records with ``start <= offset < end`` are read with Fetch requests; see the module docstring.

    Parameters
    ----------
    client_config : ClientConfig
        Connection and security settings (bootstrap servers included).
    topic : str
        ``__consumer_offsets`` (or a mirrored copy).
    ranges : list of (int, int, int)
        The planned ``(partition, start_offset, end_offset)``.
    poll_timeout_ms : int
        Longest time without progress on any partition before failing, ms.
    decoded : bool
        :data:`audit.formats.segments.RAW_SCHEMA` rows (True) or :data:`audit.formats.fetched.RECORDS_SCHEMA` rows
        (False).
    fail : callable
        ``fail(stage, partitions, exc) -> Exception`` building the error to raise (redacted, with the client
        configuration named): the data source's.
    reduce_latest : bool, default False
        (``decoded``) ``--mode latest``: each partition's records summarised
        (:func:`audit.formats.fetched.decode_prepared`), at most :data:`PARTITION_HOLD_BYTES` of one partition and
        :data:`HOLD_BYTES` in all held at once: ``HOLD_BYTES // PARTITION_HOLD_BYTES`` partitions are read at a
        time (their leaders interleaved), the others wait their turn.

    Yields
    ------
    pyarrow.RecordBatch
        The records' rows, in the schema ``decoded`` picks.

    Raises
    ------
    Exception
        Whatever ``fail`` builds: a broker unreachable past the collector's retries, an authorization failure (READ
        on the topic), an unexpected partition error, or no progress for ``poll_timeout_ms``.
    """
    from .collector import open_collector

    todo = {p: [s, e] for p, s, e in ranges if e > s}
    if not todo:
        return
    cfg = FetchSettings(client_config)
    try:
        collector = open_collector(client_config.with_overrides(receive_message_max_bytes=cfg.receive_max_bytes))
    except Exception as exc:  # noqa: BLE001
        raise fail("read: connect for", sorted(todo), exc) from None
    try:
        yield from _read_todo(collector, topic, todo, cfg, poll_timeout_ms, decoded, fail, reduce_latest)
    finally:
        collector.close()


def _read_todo(
    collector,
    topic: str,
    todo: dict[int, list[int]],
    cfg: FetchSettings,
    poll_timeout_ms: int,
    decoded: bool,
    fail: Any,
    reduce_latest: bool,
) -> Iterator[pa.RecordBatch]:
    """Read the Arrow batches of :func:`read_ranges` for the ``partition -> [position, end]`` of ``todo``.

    ``todo`` is emptied as the partitions are read, through ``collector``.
    """
    not_before: dict[int | str, float] = {}
    held: dict[int, list[PreparedChunk]] = {}  # fetched, not decoded yet (latest mode: summarised together)
    last_error: dict[int, str] = {}  # partition -> why its last fetch did not move it
    _refresh_metadata(collector, topic, todo, fail)
    last_progress = time.monotonic()
    attempt = 0
    # latest mode reads a few partitions at a time, each held whole (up to PARTITION_HOLD_BYTES) before it
    # is summarised: the task holds at most HOLD_BYTES and few summaries leave it.  The partitions wait in
    # turn, their leaders interleaved so each round still asks every broker.
    waiting = _interleaved(collector, topic, sorted(todo)) if reduce_latest else sorted(todo)
    window = max(1, HOLD_BYTES // PARTITION_HOLD_BYTES) if reduce_latest else len(todo)
    active: list[int] = []
    while todo:
        active = [p for p in active if p in todo]
        while waiting and len(active) < window:
            q = waiting.pop(0)
            if q in todo:
                active.append(q)
        by_leader, brokers, refresh = _by_leader(collector, topic, active, todo, last_error)
        now = time.monotonic()
        ready = [n for n in sorted(by_leader) if not_before.get(n, 0.0) <= now]
        if by_leader and not ready:
            time.sleep(max(0.0, min(not_before[n] for n in by_leader) - now))
            last_progress += time.monotonic() - now  # a quota's wait is not a lack of progress
            continue
        jobs = [(brokers[n], _fetch_request(topic, by_leader[n], cfg)) for n in ready]
        # the responses are let go of before decoding: only each partition's own bytes stay held
        chunks, stable, moved, again = _fetch_round(
            collector, topic, jobs, by_leader, todo, not_before, last_error, fail
        )
        refresh = refresh or again
        finished, advanced = _take_chunks(chunks, stable, todo, held, last_error, cfg.check_crcs)
        moved = moved or advanced
        flush = _to_flush(held, finished, reduce_latest)
        if flush:
            batch = [c for p in flush for c in held.pop(p)]
            yield from decode_prepared(
                batch, decoded=decoded, topic=topic, reduce_latest=reduce_latest, consume=True
            ).batches
            del batch
            pa.default_memory_pool().release_unused()  # the decoding's buffers back to the OS, not kept
        if moved:
            last_progress = time.monotonic()
            attempt = 0
        elif (time.monotonic() - last_progress) * 1000 >= poll_timeout_ms:
            raise fail("read: fetch", sorted(todo), _no_progress(topic, todo, last_error, poll_timeout_ms))
        if refresh:
            attempt += 1
            time.sleep(min(0.05 * 2**attempt, 1.0))
            _refresh_metadata(collector, topic, todo, fail)
    for p in sorted(held):
        yield from decode_prepared(
            held.pop(p), decoded=decoded, topic=topic, reduce_latest=reduce_latest, consume=True
        ).batches


def _refresh_metadata(collector, topic: str, todo: dict[int, list[int]], fail: Any) -> None:
    """Nothing: ``topic``'s metadata fetched again into ``collector`` (``fail``'s error raised when it cannot be)."""
    try:
        collector.fetch_metadata([topic])
    except Exception as exc:  # noqa: BLE001
        raise fail("read: metadata for", sorted(todo), exc) from None


def _by_leader(
    collector, topic: str, active: list[int], todo: dict[int, list[int]], last_error: dict[int, str]
) -> tuple[dict[int | str, list[tuple[int, int, int]]], dict, bool]:
    """Return ``(by_leader, brokers, refresh)`` for the ``active`` partitions.

    That is the ``(partition, position, current_leader_epoch)`` of the ``active`` partitions by leader node id,
    the leaders by node id, and whether a partition had no leader (metadata to refresh; its ``last_error`` set).
    """
    by_leader: dict[int | str, list[tuple[int, int, int]]] = {}
    brokers = {}
    refresh = False
    for p in sorted(active):
        pos = todo[p][0]
        broker = collector.leader(topic, p)
        if broker is None:
            last_error[p] = "no leader in the metadata"
            refresh = True
            continue
        state = collector.partition_metadata(topic, p)
        by_leader.setdefault(broker.node_id, []).append((p, pos, state.leader_epoch if state else -1))
        brokers[broker.node_id] = broker
    return by_leader, brokers, refresh


def _fetch_round(
    collector,
    topic: str,
    jobs: list,
    by_leader: dict[int | str, list[tuple[int, int, int]]],
    todo: dict[int, list[int]],
    not_before: dict[int | str, float],
    last_error: dict[int, str],
    fail: Any,
) -> tuple[list[FetchedChunk], dict[int, int], bool, bool]:
    """Send the ``(broker, request)`` ``jobs`` at once and return ``(chunks, stable, moved, refresh)``.

    That is each answered partition's records, its last stable offset (or high watermark), whether a position or
    end moved (a log start or end past it) and whether the metadata is to be refreshed; ``todo``, ``not_before``
    (a broker's throttle) and ``last_error`` are updated.
    """
    from .collector import CollectorError

    try:
        outcomes = collector.send_all(jobs) if jobs else []
    except CollectorError as exc:
        raise fail("read: fetch", sorted(todo), exc) from None
    moved = refresh = False
    chunks: list[FetchedChunk] = []
    stable: dict[int, int] = {}
    for (broker, _), outcome in zip(jobs, outcomes):
        if not _broker_answered(broker, outcome, by_leader[broker.node_id], not_before, last_error):
            refresh = True
            continue
        for t in outcome.responses:
            for pd in t.partitions:
                if pd.partition_index not in todo:
                    continue
                m, r = _partition_answer(collector, topic, broker, pd, todo, last_error, chunks, stable, fail)
                moved, refresh = moved or m, refresh or r
    return chunks, stable, moved, refresh


def _broker_answered(
    broker, outcome: Any, asked: list[tuple[int, int, int]], not_before: dict[int | str, float], last_error: dict
) -> bool:
    """Tell whether ``outcome`` is a response whose partitions can be read (else set the ``asked`` ones' error).

    Otherwise the ``asked`` partitions' ``last_error`` is set; its ``throttle_time_ms`` goes to ``not_before``.
    """
    from .collector import error_name

    if isinstance(outcome, BaseException):
        log.warning("fetch from broker %s failed: %s", broker, redact(outcome))
        for p, _, _ in asked:
            last_error[p] = f"broker {broker}: {type(outcome).__name__}: {redact(outcome)}"
        return False
    throttle = getattr(outcome, "throttle_time_ms", 0) or 0
    if throttle > 0:
        not_before[broker.node_id] = time.monotonic() + throttle / 1000.0
    top = getattr(outcome, "error_code", 0) or 0
    if top:
        log.warning("fetch from broker %s: %s", broker, error_name(top))
        for p, _, _ in asked:
            last_error[p] = f"broker {broker}: {error_name(top)}"
        return False
    return True


def _partition_answer(
    collector,
    topic: str,
    broker,
    pd: Any,
    todo: dict[int, list[int]],
    last_error: dict[int, str],
    chunks: list[FetchedChunk],
    stable: dict[int, int],
    fail: Any,
) -> tuple[bool, bool]:
    """Take one partition's answer ``pd`` and return ``(moved, refresh)``.

    Its records are appended to ``chunks`` (its stable end to ``stable``), or its position or end moved to the
    log's bounds (OFFSET_OUT_OF_RANGE), or a retriable error noted; ``fail``'s error is raised for any other error.
    """
    from .collector import CollectorError, acl_hint, error_name

    p = pd.partition_index
    pos, end = todo[p]
    code = pd.error_code
    moved = refresh = False
    if code == NONE:
        aborted = [(a.producer_id, a.first_offset) for a in (pd.aborted_transactions or [])]
        chunks.append(FetchedChunk(p, pd.records, pos, end, aborted))
        stable[p] = min(x if x is not None and x >= 0 else 1 << 62 for x in (pd.last_stable_offset, pd.high_watermark))
    elif code == OFFSET_OUT_OF_RANGE:
        bounds = collector.log_bounds(partitions=[(topic, p)])
        if not bounds:
            return False, True
        start, log_end = bounds[0]["log_start_offset"], bounds[0]["log_end_offset"]
        if pos < start:
            log.warning("%s-%d: log start moved to %d past position %d", topic, p, start, pos)
            todo[p][0] = start
            moved = True
        if log_end < end:
            log.warning("%s-%d: log end %d below the planned end %d", topic, p, log_end, end)
            todo[p][1] = log_end
            moved = True
        if todo[p][0] >= todo[p][1]:
            del todo[p]
    elif code == TOPIC_AUTHORIZATION_FAILED:
        raise fail("read: fetch", [p], acl_hint(code, [topic], "Fetch")) from None
    elif code in REFRESH_METADATA or _retriable(code):
        last_error[p] = f"broker {broker}: {error_name(code)}"
        refresh = True
    else:
        raise fail("read: fetch", [p], CollectorError(f"{error_name(code)} from broker {broker}"))
    return moved, refresh


def _take_chunks(
    chunks: list[FetchedChunk],
    stable: dict[int, int],
    todo: dict[int, list[int]],
    held: dict[int, list[PreparedChunk]],
    last_error: dict[int, str],
    check_crcs: bool,
) -> tuple[list[int], bool]:
    """Take the prepared ``chunks`` (emptied, first to last) and return ``(finished, moved)``.

    That is the partitions the chunks took to their end and whether a position moved; what is to decode goes to
    ``held``, ``todo`` and ``last_error`` are updated.
    """
    finished = []
    moved = False
    chunks.reverse()
    while chunks:
        c = prepare_fetched(chunks.pop(), check_crcs)
        p, (pos, end) = c.partition, todo[c.partition]
        if len(c.scan) or c.issues:
            held.setdefault(p, []).append(c)
        if c.next_offset is None and c.issues:  # an unreadable batch first: named if the read gives up
            last_error[p] = f"{c.issues[0].reason} {c.issues[0].detail}"
        if c.next_offset is not None and c.next_offset > pos:
            todo[p][0] = pos = c.next_offset
            moved = True
        elif stable[p] <= pos:
            # nothing left below the log's end: the planned end was above it (truncated meanwhile)
            todo[p][1] = end = pos
        if pos >= end:
            del todo[p]
            finished.append(p)
    return finished, moved


def _to_flush(held: dict[int, list[PreparedChunk]], finished: list[int], reduce_latest: bool) -> list[int]:
    """Return the partitions of ``held`` to decode now.

    Every one when nothing is summarised (many batches frame in lock-step); else those ``finished`` or holding
    :data:`PARTITION_HOLD_BYTES`, then the fullest while the task holds more than :data:`HOLD_BYTES` (the more of a
    partition one summary sees, the fewer rows leave the task).
    """
    if not reduce_latest:
        return sorted(held)
    sizes = {q: sum(c.size for c in cs) for q, cs in held.items()}
    flush = [q for q in held if q in finished or sizes[q] >= PARTITION_HOLD_BYTES]
    size = sum(sizes[q] for q in held if q not in flush)
    if size > HOLD_BYTES:
        for q in sorted((q for q in held if q not in flush), key=lambda q: -sizes[q]):
            flush.append(q)
            size -= sizes[q]
            if size <= HOLD_BYTES // 2:
                break
    return flush


def _no_progress(topic: str, todo: dict[int, list[int]], last_error: dict[int, str], poll_timeout_ms: int) -> Exception:
    """Build the ``TimeoutError`` naming the partitions left in ``todo``, their positions and why they did not move."""
    left = "; ".join(
        f"{topic}-{p} at offset {pos} (planned end {end}" + (f"; last: {last_error[p]})" if p in last_error else ")")
        for p, (pos, end) in todo.items()
    )
    return TimeoutError(f"no progress for {poll_timeout_ms} ms: {left}")


def _interleaved(collector, topic: str, partitions: list[int]) -> list[int]:
    """Order ``partitions`` so that consecutive ones have different leaders where they can.

    The leaders are those in the collector's metadata; a partition with no leader comes last.
    """
    by: dict[object, list[int]] = {}
    for p in partitions:
        b = collector.leader(topic, p)
        by.setdefault(b.node_id if b is not None else None, []).append(p)
    lists = [by[k] for k in sorted(by, key=lambda k: (k is None, str(k)))]
    return [ps[i] for i in range(max(map(len, lists), default=0)) for ps in lists if i < len(ps)]


def _retriable(code: int) -> bool:
    import kafka.errors as Errors

    return bool(getattr(Errors.for_code(code), "retriable", False))
