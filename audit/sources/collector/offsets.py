"""OffsetsForLeaderEpoch and ListOffsets: the two questions the judge asks about every partition.

* **epoch_end_offsets** - ``OffsetsForLeaderEpoch`` (API key 23, KIP-101/KIP-320) per
  ``(topic, partition, committed leader epoch)``, sent to the partition's current leader with
  ``current_leader_epoch`` set so that a stale leader fences the request.
* **bounds** - ``ListOffsets`` (API key 2) EARLIEST (-2), LATEST (-1) and, where the leader negotiated
  v8+, EARLIEST_LOCAL (-4, KIP-405/KIP-1005) per partition, from its leader.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator, Mapping

from kafka.protocol.consumer import (
    ListOffsetsRequest,
    OffsetForLeaderEpochRequest,
)

from .leaders import LeaderRequests
from .model import Broker, PartitionMetadata

# the package's logger: records keep the name ``audit.sources.collector``
log = logging.getLogger(__package__)

EARLIEST = -2  # ListOffsets timestamp spec: log start offset
LATEST = -1  # ListOffsets timestamp spec: log end (high watermark for READ_UNCOMMITTED)
#: ListOffsets timestamp spec: the leader's local log start offset (KIP-405; clients from KIP-1005)
EARLIEST_LOCAL = -4
#: first ListOffsets version whose brokers accept EARLIEST_LOCAL (ListOffsetsRequest.json "Version 8
#: enables listing offsets by local log start offset"; Kafka 3.9+ answers -4 at a lower version with
#: UNSUPPORTED_VERSION, brokers before Kafka 3.5 read it as a timestamp and answer some record's offset)
EARLIEST_LOCAL_MIN_VERSION = 8
CONSUMER_REPLICA_ID = -1


def is_local_start(entry: tuple) -> bool:
    """Tell whether ``(topic, partition, spec)`` is the EARLIEST_LOCAL entry of a bounds request."""
    return entry[2] == EARLIEST_LOCAL


def parse_list_offsets(response: Any) -> Iterator[tuple]:
    """``(topic, partition, error_code, offset)`` of each partition of a ListOffsets response."""
    for t in response.topics:
        for p in t.partitions:
            offset = p.offset
            if (offset is None or offset < 0) and getattr(p, "old_style_offsets", None):
                offset = p.old_style_offsets[0]
            yield t.name, p.partition_index, p.error_code, offset


@dataclass
class BoundsAnswers:
    """The ListOffsets answers of one :meth:`OffsetRequests.log_bounds` call.

    ``offsets``: ``{(topic, partition): {spec: offset}}``; ``answered_by``: the leader whose answer the row
    names (the LATEST one's, else the first); ``on_skip(entry, reason)``: told of an EARLIEST_LOCAL answer
    without an offset.
    """

    on_skip: Callable[[tuple, str], None]
    offsets: dict[tuple[str, int], dict[int, int]] = field(default_factory=lambda: defaultdict(dict))
    answered_by: dict[tuple[str, int], Broker] = field(default_factory=dict)

    def on_ok(self, entry: tuple, broker: Broker, offset: int) -> None:
        """Record the offset ``broker`` answered for ``entry`` (``(topic, partition, spec)``)."""
        offsets, answered_by = self.offsets, self.answered_by
        if entry[2] == EARLIEST_LOCAL:  # a broker may answer it without an offset: left unknown
            if offset is not None and offset >= 0:
                offsets[(entry[0], entry[1])][EARLIEST_LOCAL] = int(offset)
            else:
                self.on_skip(entry, f"no offset from {broker}")
            return
        offsets[(entry[0], entry[1])][entry[2]] = int(offset)
        if entry[2] == LATEST or (entry[0], entry[1]) not in answered_by:
            answered_by[(entry[0], entry[1])] = broker

    def rows(self, partitions: Mapping[tuple[str, int], PartitionMetadata]) -> list[dict]:
        """Return one bounds row per partition answered both EARLIEST and LATEST, sorted by topic and partition.

        ``leader_epoch`` comes from ``partitions`` (the accepted metadata).
        """
        rows = []
        for (topic, partition), found in sorted(self.offsets.items()):
            if EARLIEST not in found or LATEST not in found:
                continue
            state = partitions.get((topic, partition))
            rows.append(
                {
                    "topic": topic,
                    "partition": partition,
                    "log_start_offset": found[EARLIEST],
                    "local_log_start_offset": found.get(EARLIEST_LOCAL),
                    "log_end_offset": found[LATEST],
                    "high_watermark": found[LATEST],
                    "leader_id": int(self.answered_by[(topic, partition)].node_id),
                    "leader_epoch": state.leader_epoch if state else -1,
                }
            )
        return rows


class OffsetRequests(LeaderRequests):
    """:meth:`epoch_end_offsets` (OffsetsForLeaderEpoch) and :meth:`log_bounds` (ListOffsets)."""

    # -------------------------------------------------- OffsetsForLeaderEpoch

    def epoch_end_offsets(self, requests: Iterable[tuple[str, int, int]]) -> list[dict]:
        """Return the end offset of each requested leader epoch, from the partition's leader.

        Protocol: OffsetsForLeaderEpoch (KIP-101) with ``replica_id=-1`` and ``current_leader_epoch`` from metadata
        (KIP-320 fencing).  Each partition appears once per request; requests are batched per leader and sent with
        at most ``max_concurrency`` in flight.  FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH, NOT_LEADER_OR_FOLLOWER (and
        other retriable errors) refresh metadata and retry with exponential backoff.

        Parameters
        ----------
        requests : iterable of (str, int, int)
            ``(topic, partition, committed_leader_epoch)`` triples; duplicates are answered once, epochs < 0
            (unknown, never validated by Kafka's consumer) are skipped.

        Returns
        -------
        list of dict
            Rows ``{topic: str, partition: int, requested_epoch: int, leader_epoch: int, end_offset: int,
            answered_by_broker: int}``: the leader's answer per FORMATS.md section 4 (``-1, -1`` when undefined),
            sorted by topic, partition, requested_epoch.

        Raises
        ------
        MissingAclError
            No DESCRIBE on the topic.
        PartitionsUnavailableError
        DeadlineExceededError
        BrokersUnreachableError
        AuthenticationFailedError
        """
        wanted = {(str(t), int(p), int(e)) for t, p, e in requests}
        entries = sorted(r for r in wanted if r[2] >= 0)
        self.stats["epoch_end_offsets.skipped_negative_epochs"] += len(wanted) - len(entries)
        rows: list[dict] = []
        if not entries:
            return rows
        with self._operation():
            self._ensure_metadata({e[0] for e in entries})

            def build(chunk: list[tuple]) -> Any:
                topics: dict[str, list] = {}
                for topic, partition, epoch in chunk:
                    state = self._partitions[(topic, partition)]
                    topics.setdefault(topic, []).append(
                        OffsetForLeaderEpochRequest.OffsetForLeaderTopic.OffsetForLeaderPartition(
                            partition=partition, current_leader_epoch=state.leader_epoch, leader_epoch=epoch
                        )
                    )
                return OffsetForLeaderEpochRequest(
                    replica_id=CONSUMER_REPLICA_ID,
                    topics=[
                        OffsetForLeaderEpochRequest.OffsetForLeaderTopic(topic=t, partitions=ps)
                        for t, ps in topics.items()
                    ],
                )

            def parse(response: Any) -> Iterator[tuple]:
                for t in response.topics:
                    for p in t.partitions:
                        yield t.topic, p.partition, p.error_code, (p.leader_epoch, p.end_offset)

            def on_ok(entry: tuple, broker: Broker, payload: tuple) -> None:
                leader_epoch, end_offset = payload
                if leader_epoch is None or end_offset is None or leader_epoch < 0 or end_offset < 0:
                    leader_epoch, end_offset = -1, -1
                rows.append(
                    {
                        "topic": entry[0],
                        "partition": entry[1],
                        "requested_epoch": entry[2],
                        "leader_epoch": int(leader_epoch),
                        "end_offset": int(end_offset),
                        "answered_by_broker": int(broker.node_id),
                    }
                )

            self._leader_round_trips("epoch_end_offsets", entries, build, parse, on_ok, "OffsetsForLeaderEpoch")
        rows.sort(key=lambda r: (r["topic"], r["partition"], r["requested_epoch"]))
        return rows

    # ------------------------------------------------------------- ListOffsets
    def log_bounds(self, topics: Iterable[str] = (), partitions: Iterable[tuple[str, int]] = ()) -> list[dict]:
        """Return the log start and end offsets of every partition of ``topics`` and of the listed ``partitions``.

        Protocol: ListOffsets (API key 2) EARLIEST (-2), LATEST (-1) and, to a leader whose connection negotiated
        ListOffsets v8+ (ApiVersions; the transport's ``api_version``), EARLIEST_LOCAL (-4; KIP-1005,
        ListOffsetsRequest.json "Version 8 enables listing offsets by local log start offset"), with
        ``current_leader_epoch`` (KIP-320 fencing), batched per leader.  A partition may appear only once in a request
        (Kafka answers a duplicate with INVALID_REQUEST), so each spec goes in its own request to the leader, all sent
        in the same round; the -4 requests carry ``min_version=8`` so kafka-python never sends them lower.

        Parameters
        ----------
        topics : iterable of str
            Topics whose every partition gets a row.
        partitions : iterable of (str, int)
            Explicitly listed ``(topic, partition)`` pairs.

        Returns
        -------
        list of dict
            Rows ``{topic: str, partition: int, log_start_offset: int, local_log_start_offset: int | None,
            log_end_offset: int, high_watermark: int, leader_id: int, leader_epoch: int}`` (offsets are record
            offsets).  ``log_end_offset`` is ListOffsets LATEST under READ_UNCOMMITTED, i.e. the high watermark (the
            end a consumer can see), so ``high_watermark == log_end_offset``.  ``local_log_start_offset`` is
            ListOffsets EARLIEST_LOCAL: the first offset still on the leader's local disk
            (``UnifiedLog.localLogStartOffset``), ``>= log_start_offset`` with tiered storage (KIP-405) and equal to
            it without; None when the leader's negotiated ListOffsets version is below 8 (or the transport cannot
            tell the version), or when the leader answered that entry with an error (or never, within the retries):
            the partition's other columns are unaffected.  ``leader_id`` is the broker that answered;
            ``leader_epoch`` its epoch from metadata.

        Raises
        ------
        MissingAclError
            No DESCRIBE on the topic.
        PartitionsUnavailableError
        DeadlineExceededError
        BrokersUnreachableError
        AuthenticationFailedError
        """
        topics = {str(t) for t in topics}
        explicit = {(str(t), int(p)) for t, p in partitions}
        if not topics and not explicit:
            return []
        answers = BoundsAnswers(self._note_local_log_start_unknown)
        with self._operation():
            self._ensure_metadata(topics | {t for t, _ in explicit})
            self._leader_round_trips(
                "bounds",
                self._bounds_entries(topics, explicit),
                self._list_offsets_request,
                parse_list_offsets,
                answers.on_ok,
                "ListOffsets",
                optional=is_local_start,
                admits=self._admits_earliest_local,
                on_skip=self._note_local_log_start_unknown,
            )
        return answers.rows(self._partitions)

    def _bounds_entries(self, topics: set[str], explicit: set[tuple[str, int]]) -> list[tuple[str, int, int]]:
        """``(topic, partition, spec)`` for every spec of every partition of ``topics`` plus ``explicit``, sorted."""
        scope = set(explicit)
        for t in topics:
            scope |= {(t, p) for p in self._topic_partitions.get(t, ())}
        return sorted((t, p, spec) for t, p in scope for spec in (EARLIEST_LOCAL, EARLIEST, LATEST))

    def _list_offsets_request(self, chunk: list[tuple]) -> Any:
        """Build the ListOffsets request for ``chunk`` (``(topic, partition, spec)``, one per partition)."""
        by_topic: dict[str, list] = {}
        for topic, partition, spec in chunk:
            state = self._partitions[(topic, partition)]
            by_topic.setdefault(topic, []).append(
                ListOffsetsRequest.ListOffsetsTopic.ListOffsetsPartition(
                    partition_index=partition, current_leader_epoch=state.leader_epoch, timestamp=spec
                )
            )
        extra = {}
        if any(spec == EARLIEST_LOCAL for _, _, spec in chunk):
            # never below v8: a broker before Kafka 3.5 would read -4 as a timestamp
            extra["min_version"] = EARLIEST_LOCAL_MIN_VERSION
        return ListOffsetsRequest(
            replica_id=CONSUMER_REPLICA_ID,
            isolation_level=0,
            topics=[ListOffsetsRequest.ListOffsetsTopic(name=t, partitions=ps) for t, ps in by_topic.items()],
            timeout_ms=self.config.request_timeout_ms,
            **extra,
        )

    def _admits_earliest_local(self, broker: Broker) -> bool:
        """Tell whether ``broker`` negotiated ListOffsets v8+ (EARLIEST_LOCAL).

        Raises when connecting fails (not known yet).
        """
        version = self._request_version(broker, ListOffsetsRequest)
        return version is not None and version >= EARLIEST_LOCAL_MIN_VERSION

    def _note_local_log_start_unknown(self, entry: tuple, reason: str) -> None:
        """Count (and log) a partition left without a local log start offset."""
        with self._stats_lock:
            self.stats["bounds.local_log_start_unknown"] += 1
        log.debug("%s-%s: no local log start offset (%s)", entry[0], entry[1], reason)
