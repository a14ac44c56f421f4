"""Topic, partition and leader metadata of the live-cluster collector.

Metadata (API key 3) is requested only for the topics in scope, in bounded
batches (KIP-526), never for all topics and never with auto topic creation.
Partition metadata whose leader epoch is older than one already seen is ignored
and refetched with exponential backoff (KIP-232).  When no metadata can be
obtained from any known broker for ``metadata.recovery.rebootstrap.trigger.ms``
or a response carries REBOOTSTRAP_REQUIRED (error 129), connections are closed
and the collector bootstraps again from ``bootstrap.servers`` (KIP-1102).
"""

from __future__ import annotations

import base64
import logging
from typing import Any, Iterable, Iterator, Sequence

from kafka.protocol.metadata import MetadataRequest

from ..client_config import redact
from .errors import (
    INVALID_TOPIC_EXCEPTION,
    LEADER_NOT_AVAILABLE,
    NONE,
    REBOOTSTRAP_REQUIRED,
    REPLICA_NOT_AVAILABLE,
    TOPIC_AUTHORIZATION_FAILED,
    UNKNOWN_TOPIC_ID,
    UNKNOWN_TOPIC_OR_PARTITION,
    BrokersUnreachableError,
    acl_hint,
    error_name,
)
from .model import Broker, PartitionMetadata
from .transport import BrokerFailure, RequestSender

# the package's logger: records keep the name ``audit.sources.collector``
log = logging.getLogger(__package__)


def chunks(items: Sequence, size: int) -> Iterator[list]:
    """``items`` in consecutive lists of at most ``size``."""
    for i in range(0, len(items), size):
        yield list(items[i : i + size])


class MetadataCache(RequestSender):
    """The accepted metadata: brokers, partitions and their leaders, missing topics, topic ids.

    The state it works on is set by :class:`audit.sources.collector.OffsetCollector`.
    """

    _brokers: dict[int, Broker]
    _partitions: dict[tuple[str, int], PartitionMetadata]
    _last_seen_epoch: dict[tuple[str, int], int]
    _topic_partitions: dict[str, set[int]]
    _missing_topics: dict[str, str]
    topic_ids: dict[str, str]
    _metadata_wait_started: float | None
    _rr: int
    problems: list[dict]
    rebootstrap_reasons: list[str]

    def leader(self, topic: str, partition: int) -> Broker | None:
        """Return the leader of ``topic``-``partition`` in the accepted metadata.

        None: unknown, offline, or not a known broker.
        """
        state = self._partitions.get((topic, partition))
        if state is None or state.leader_id is None or state.leader_id < 0:
            return None
        return self._brokers.get(state.leader_id)

    def _metadata_candidates(self) -> list[Broker]:
        brokers = sorted(self._brokers.values(), key=lambda b: b.node_id) or list(self._bootstrap)
        self._rr = (self._rr + 1) % len(brokers)
        rotated = brokers[self._rr :] + brokers[: self._rr]
        return sorted(rotated, key=lambda b: self._failures.get(str(b), [0])[0])

    def _rebootstrap_due(self) -> bool:
        cfg = self.config
        return (
            cfg.metadata_recovery_strategy == "rebootstrap"
            and self._metadata_wait_started is not None
            and (self._clock() - self._metadata_wait_started) * 1000.0 >= cfg.metadata_recovery_rebootstrap_trigger_ms
        )

    def _rebootstrap(self, reason: str) -> None:
        """KIP-1102: close all connections and start again from bootstrap.servers."""
        log.warning("rebootstrapping from %s: %s", ", ".join(map(str, self._bootstrap)), reason)
        self.stats["rebootstraps"] += 1
        self.rebootstrap_reasons.append(reason)
        close = getattr(self._transport, "close_connections", None)
        if close is not None:
            close()
        self._brokers.clear()
        for b in self._bootstrap:
            rec = self._failures.get(str(b))
            if rec:
                rec[0] = 0
        self._metadata_wait_started = self._clock()

    def _request_metadata(self, topics: list[str]) -> tuple[Any, Broker]:
        """One MetadataRequest for exactly ``topics`` from any reachable broker."""
        cfg = self.config
        if self._metadata_wait_started is None:
            self._metadata_wait_started = self._clock()
        tried: list[str] = []
        attempt = 0
        while True:
            for broker in self._metadata_candidates():
                if self._remaining() <= 0:
                    preview = ", ".join(topics[:5]) + (" ..." if len(topics) > 5 else "")
                    names = list(dict.fromkeys(tried)) or [str(b) for b in self._metadata_candidates()]
                    raise BrokersUnreachableError(
                        f"no metadata for {len(topics)} topic(s) [{preview}] from any broker within the "
                        f"{cfg.deadline_ms} ms deadline (rebootstraps: {self.stats['rebootstraps']}, "
                        f"metadata.recovery.strategy={cfg.metadata_recovery_strategy}); brokers tried: "
                        f"{self._describe_brokers(dict.fromkeys(tried))}",
                        names,
                    )
                tried.append(str(broker))
                request = MetadataRequest(
                    topics=[MetadataRequest.MetadataRequestTopic(name=t) for t in topics],
                    allow_auto_topic_creation=False,
                )
                try:
                    response = self._send(broker, request)
                except BrokerFailure as failure:
                    failure_text: Any = failure.error
                else:
                    top = getattr(response, "error_code", 0) or 0
                    if top == REBOOTSTRAP_REQUIRED:
                        self._note_failure(broker, "REBOOTSTRAP_REQUIRED (129)")
                        if cfg.metadata_recovery_strategy == "rebootstrap":
                            self._rebootstrap(f"broker {broker} answered REBOOTSTRAP_REQUIRED")
                            break
                        continue
                    failure_text = (
                        f"Metadata error {error_name(top)}"
                        if top
                        else None
                        if response.brokers
                        else "Metadata response lists no brokers"
                    )
                if failure_text is not None:
                    self._note_failure(broker, failure_text)
                    # KIP-1102: checked after a failed attempt, so every (re)bootstrap gets tried at least once
                    if self._rebootstrap_due():
                        self._rebootstrap(
                            f"no metadata from any known broker for {cfg.metadata_recovery_rebootstrap_trigger_ms} "
                            "ms (metadata.recovery.rebootstrap.trigger.ms)"
                        )
                        break
                    continue
                self._note_success(broker)
                self._metadata_wait_started = None
                self._brokers = {
                    b.node_id: Broker(b.node_id, b.host, b.port, getattr(b, "rack", None)) for b in response.brokers
                }
                return response, broker
            attempt += 1
            self._backoff_sleep(attempt)

    def _apply_metadata(
        self, response: Any, requested: set[str], broker: Broker, unauthorized: set[str], topic_errors: dict[str, str]
    ) -> set[str]:
        """Merge one MetadataResponse; return the topics to refetch."""
        retry: set[str] = set()
        seen: set[str] = set()
        for t in response.topics:
            name = t.name
            if name not in requested:
                self.stats["metadata.unrequested_topics_ignored"] += 1
                continue
            seen.add(name)
            code = t.error_code
            if code == NONE:
                self._missing_topics.pop(name, None)
                topic_errors.pop(name, None)
                tid = getattr(t, "topic_id", None)
                if tid is not None and getattr(tid, "int", None):  # Metadata v10+; the zero Uuid means none
                    self.topic_ids[name] = base64.urlsafe_b64encode(tid.bytes).rstrip(b"=").decode()
                for p in t.partitions:
                    tp = (name, p.partition_index)
                    self._topic_partitions[name].add(p.partition_index)
                    epoch = p.leader_epoch if p.leader_epoch is not None else -1
                    seen_epoch = self._last_seen_epoch.get(tp, -1)
                    if epoch >= 0 and epoch < seen_epoch:
                        # KIP-232: never step back to older metadata; keep ours, refetch.
                        self.stats["metadata.stale_partitions_ignored"] += 1
                        log.info(
                            "ignoring stale metadata for %s-%s from %s: leader epoch %s < %s already seen",
                            name,
                            p.partition_index,
                            broker,
                            epoch,
                            seen_epoch,
                        )
                        retry.add(name)
                        continue
                    if p.error_code not in (NONE, LEADER_NOT_AVAILABLE, REPLICA_NOT_AVAILABLE):
                        topic_errors[name] = f"partition {p.partition_index}: {error_name(p.error_code)}"
                    self._partitions[tp] = PartitionMetadata(
                        name,
                        p.partition_index,
                        p.leader_id,
                        epoch,
                        tuple(p.replica_nodes or ()),
                        tuple(p.isr_nodes or ()),
                        tuple(getattr(p, "offline_replicas", None) or ()),
                    )
                    if epoch >= 0:
                        self._last_seen_epoch[tp] = max(seen_epoch, epoch)
                    if p.leader_id is None or p.leader_id < 0:
                        retry.add(name)
                        topic_errors[name] = f"partition {p.partition_index} has no leader ({error_name(p.error_code)})"
            elif code in (UNKNOWN_TOPIC_OR_PARTITION, UNKNOWN_TOPIC_ID, INVALID_TOPIC_EXCEPTION):
                self._missing_topics[name] = error_name(code)
            elif code == TOPIC_AUTHORIZATION_FAILED:
                unauthorized.add(name)
            else:
                retry.add(name)
                topic_errors[name] = error_name(code)
        for name in requested - seen:
            retry.add(name)
            topic_errors.setdefault(name, f"topic missing from the Metadata response of {broker}")
        return retry

    def fetch_metadata(self, topics: Iterable[str]) -> dict[tuple[str, int], PartitionMetadata]:
        """Fetch metadata for exactly ``topics``.

        KIP-526: only these, in batches of ``metadata_batch_size``, ``allow_auto_topic_creation=False``.  Topics the
        cluster does not know are recorded in :attr:`missing_topics` (and ``problems``), not raised.

        Returns
        -------
        dict of (str, int) to PartitionMetadata
            ``{(topic, partition): PartitionMetadata}`` for the topics found.

        Raises
        ------
        MissingAclError
            TOPIC_AUTHORIZATION_FAILED (needs DESCRIBE on the topics).
        BrokersUnreachableError
            No broker answered before the deadline.
        AuthenticationFailedError
            SASL/TLS failure.
        """
        wanted = sorted({t for t in topics if t})
        if not wanted:
            return {}
        with self._operation():
            pending = wanted
            attempt = 0
            unauthorized: set[str] = set()
            topic_errors: dict[str, str] = {}
            while pending:
                retry: set[str] = set()
                for batch in chunks(pending, self.config.metadata_batch_size):
                    response, broker = self._request_metadata(batch)
                    retry |= self._apply_metadata(response, set(batch), broker, unauthorized, topic_errors)
                if unauthorized:
                    raise acl_hint(TOPIC_AUTHORIZATION_FAILED, unauthorized, "Metadata")
                pending = sorted(retry)
                if not pending:
                    break
                attempt += 1
                if attempt > self.config.max_retries or self._remaining() <= 0:
                    for name in pending:
                        if name in topic_errors:
                            log.warning("metadata for topic %s still incomplete: %s", name, topic_errors[name])
                    break
                self._backoff_sleep(attempt)
            for name in wanted:
                if name in self._missing_topics:
                    self._problem("metadata", name, None, self._missing_topics[name])
        wanted_set = set(wanted)
        return {tp: st for tp, st in self._partitions.items() if tp[0] in wanted_set}

    @property
    def missing_topics(self) -> dict[str, str]:
        """``{topic: error name}`` for topics the cluster reported as unknown."""
        return dict(self._missing_topics)

    @property
    def brokers(self) -> dict[int, Broker]:
        """Brokers of the last accepted Metadata response."""
        return dict(self._brokers)

    def partition_metadata(self, topic: str, partition: int) -> PartitionMetadata | None:
        """Return the accepted metadata for one partition, if any."""
        return self._partitions.get((topic, partition))

    def _problem(self, stage: str, topic: str, partition: int | None, error: str) -> None:
        row = {"stage": stage, "topic": topic, "partition": partition, "error": redact(error)}
        if row not in self.problems:
            self.problems.append(row)

    # ------------------------------------------------- per-leader requests

    def _ensure_metadata(self, topics: Iterable[str]) -> None:
        unknown = sorted({t for t in topics if t not in self._topic_partitions and t not in self._missing_topics})
        if unknown:
            self.fetch_metadata(unknown)
