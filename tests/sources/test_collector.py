"""Tests for audit.sources.collector against simulated brokers.

Every request the collector sends is encoded with kafka-python's own protocol
classes at the highest version, decoded again (what a broker would read), and
every answer is built with the real response classes, encoded and decoded, so
field names and versions are checked as on the wire.  No network is used
except one loopback test of the real kafka-python transport against an
in-process fake broker on 127.0.0.1.
"""

from __future__ import annotations

import socket
import struct
import threading
import time

import kafka.errors as Errors
import pytest
from kafka.protocol.consumer import (
    ListOffsetsRequest,
    ListOffsetsResponse,
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
)
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse, MetadataRequest, MetadataResponse

from audit.sources.client_config import parse_client_properties, redact
from audit.sources.collector import (
    AuthenticationFailedError,
    Broker,
    BrokersUnreachableError,
    CollectorConfig,
    KafkaPythonTransport,
    MissingAclError,
    OffsetCollector,
    PartitionsUnavailableError,
)

MD_V = MetadataRequest.max_version
OFLE_V = OffsetForLeaderEpochRequest.max_version
LO_V = ListOffsetsRequest.max_version

BROKERS = {1: ("b1", 9092), 2: ("b2", 9092), 3: ("b3", 9092)}


# ---------------------------------------------------------------- fakes


class FakeClock:
    def __init__(self):
        self.now = 1000.0
        self.sleeps: list[float] = []
        self._lock = threading.Lock()

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        with self._lock:
            self.now += seconds

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.advance(seconds)


def wire(request):
    """Encode at the max version and decode again, as a broker would see it."""
    cls = type(request)
    version = cls.max_version
    data = request.encode(version=version)
    return cls.decode(data, version=version), version


def roundtrip(response, version):
    decoded = type(response).decode(response.encode(version=version), version=version)
    decoded._header = None  # decode() leaves the header slot unset when there is no header
    return decoded


def epoch_end_offset(cache, log_end, epoch):
    """FORMATS.md section 4 (LeaderEpochFileCache.endOffsetFor)."""
    if not cache or epoch < 0:
        return -1, -1
    epochs = [e for e, _ in cache]
    if epoch == epochs[-1]:
        return epoch, log_end
    if epoch > epochs[-1]:
        return -1, -1
    if epoch < epochs[0]:
        return epoch, cache[0][1]
    floor = max(e for e in epochs if e <= epoch)
    nxt = next(start for e, start in cache if e > floor)
    return floor, nxt


class SimCluster:
    """Brokers, partition leaders/epochs and logs; answers like Kafka would."""

    def __init__(self, partitions, brokers=None, caches=None, log_start=None, log_end=None, local_start=None):
        self.brokers = dict(brokers or BROKERS)
        self.partitions = dict(partitions)  # (topic, p) -> (leader, epoch)
        self.caches = dict(caches or {})  # (topic, p) -> [(epoch, start)]
        self.log_start = dict(log_start or {})
        self.log_end = dict(log_end or {})
        self.local_start = dict(local_start or {})  # (topic, p) -> local log start (tiered); default log_start
        self.down: set = set()  # node ids (or bootstrap ids) that fail to connect
        self.metadata_overrides: list = []  # callables(request) -> response or None, consumed FIFO
        # (api, topic, p) -> list of error codes consumed FIFO; api "list-4": only ListOffsets' -4 entries
        self.partition_errors: dict = {}
        self.calls: list = []  # (node_id, api name, decoded request)
        self.lock = threading.Lock()

    # -- responses
    def metadata_response(self, names, partitions=None, brokers=None, error_code=0):
        partitions = self.partitions if partitions is None else partitions
        brokers = self.brokers if brokers is None else brokers
        topics = []
        for name in names:
            parts = sorted((p, v) for (t, p), v in partitions.items() if t == name)
            if not parts:
                topics.append(
                    MetadataResponse.MetadataResponseTopic(error_code=3, name=name, is_internal=False, partitions=[])
                )
                continue
            topics.append(
                MetadataResponse.MetadataResponseTopic(
                    error_code=0,
                    name=name,
                    is_internal=name.startswith("__"),
                    partitions=[
                        MetadataResponse.MetadataResponseTopic.MetadataResponsePartition(
                            error_code=0 if leader >= 0 else 5,
                            partition_index=p,
                            leader_id=leader,
                            leader_epoch=epoch,
                            replica_nodes=sorted(self.brokers),
                            isr_nodes=sorted(self.brokers),
                            offline_replicas=[],
                        )
                        for p, (leader, epoch) in parts
                    ],
                )
            )
        return MetadataResponse(
            throttle_time_ms=0,
            cluster_id="sim",
            controller_id=1,
            error_code=error_code,
            brokers=[
                MetadataResponse.MetadataResponseBroker(node_id=n, host=h, port=port, rack=None)
                for n, (h, port) in sorted(brokers.items())
            ],
            topics=topics,
        )

    def _next_error(self, api, topic, partition):
        queue = self.partition_errors.get((api, topic, partition))
        if queue:
            return queue.pop(0)
        return None

    def _fence(self, node_id, topic, partition, current_epoch):
        leader, epoch = self.partitions[(topic, partition)]
        if leader != node_id:
            return 6
        if current_epoch >= 0 and current_epoch < epoch:
            return 74
        if current_epoch > epoch:
            return 75
        return 0

    def handle(self, target, request):
        sent_version = request.API_VERSION  # the version a real client negotiated, if any
        decoded, version = wire(request)
        node = target.node_id
        with self.lock:
            self.calls.append((node, type(decoded).__name__, decoded))
        if node in self.down:
            raise Errors.KafkaConnectionError(f"connection to {target} refused")
        if isinstance(decoded, MetadataRequest):
            assert decoded.topics is not None, "never ask for all topics"
            names = [t.name for t in decoded.topics]
            while self.metadata_overrides:
                override = self.metadata_overrides.pop(0)
                response = override(names)
                if response is not None:
                    return roundtrip(response, version)
            return roundtrip(self.metadata_response(names), version)
        if isinstance(decoded, OffsetForLeaderEpochRequest):
            assert decoded.replica_id == -1
            topics = []
            for t in decoded.topics:
                parts = []
                for p in t.partitions:
                    code = self._next_error("ofle", t.topic, p.partition)
                    if code is None:
                        code = self._fence(node, t.topic, p.partition, p.current_leader_epoch)
                    le, eo = (-1, -1)
                    if code == 0:
                        le, eo = epoch_end_offset(
                            self.caches.get((t.topic, p.partition), []),
                            self.log_end.get((t.topic, p.partition), 0),
                            p.leader_epoch,
                        )
                    parts.append(
                        OffsetForLeaderEpochResponse.OffsetForLeaderTopicResult.EpochEndOffset(
                            error_code=code, partition=p.partition, leader_epoch=le, end_offset=eo
                        )
                    )
                topics.append(OffsetForLeaderEpochResponse.OffsetForLeaderTopicResult(topic=t.topic, partitions=parts))
            return roundtrip(OffsetForLeaderEpochResponse(throttle_time_ms=0, topics=topics), version)
        if isinstance(decoded, ListOffsetsRequest):
            assert decoded.replica_id == -1 and decoded.isolation_level == 0
            topics = []
            for t in decoded.topics:
                parts = []
                for p in t.partitions:
                    code = None
                    if p.timestamp == -4:
                        code = self._next_error("list-4", t.name, p.partition_index)
                        if code is None and sent_version is not None and sent_version < 8:
                            code = 35  # UNSUPPORTED_VERSION, as Kafka 3.9+ answers -4 below v8
                    if code is None:
                        code = self._next_error("list", t.name, p.partition_index)
                    if code is None:
                        code = self._fence(node, t.name, p.partition_index, p.current_leader_epoch)
                    offset = -1
                    if code == 0:
                        key = (t.name, p.partition_index)
                        start = self.log_start.get(key, 0)
                        offset = {-2: start, -4: self.local_start.get(key, start)}.get(
                            p.timestamp, self.log_end.get(key, 0)
                        )
                    parts.append(
                        ListOffsetsResponse.ListOffsetsTopicResponse.ListOffsetsPartitionResponse(
                            partition_index=p.partition_index,
                            error_code=code,
                            timestamp=-1,
                            offset=offset,
                            leader_epoch=self.partitions[(t.name, p.partition_index)][1],
                        )
                    )
                topics.append(ListOffsetsResponse.ListOffsetsTopicResponse(name=t.name, partitions=parts))
            return roundtrip(ListOffsetsResponse(throttle_time_ms=0, topics=topics), version)
        raise AssertionError(f"unexpected request {decoded!r}")


class FakeTransport:
    def __init__(self, cluster, clock=None, cost=0.0):
        self.cluster = cluster
        self.clock = clock
        self.cost = cost
        self.closed_connections = 0
        self.close_times: list[float] = []

    def send(self, target, request, timeout_ms=None):
        assert isinstance(target, Broker)
        if self.clock is not None and self.cost:
            self.clock.advance(self.cost)
        return self.cluster.handle(target, request)

    def close_connections(self):
        self.closed_connections += 1
        if self.clock is not None:
            self.close_times.append(self.clock())


class VersionedTransport(FakeTransport):
    """A FakeTransport that knows each broker's ApiVersions (``list_offsets_max``: node id -> the broker's
    highest ListOffsets version, default the client's) and, like kafka-python, sends each request at the
    highest version both support, refusing one whose ``min_version`` is above it (IncompatibleBrokerVersion)."""

    def __init__(self, cluster, clock=None, cost=0.0, list_offsets_max=None):
        super().__init__(cluster, clock, cost)
        self.list_offsets_max = dict(list_offsets_max or {})
        self.probes: list = []  # node ids asked for their versions
        self.sent: list = []  # (node id, version, timestamps, request min_version) of ListOffsets requests

    def _version(self, target, request_type):
        if request_type is ListOffsetsRequest or isinstance(request_type, ListOffsetsRequest):
            return min(LO_V, self.list_offsets_max.get(target.node_id, LO_V))
        return request_type.max_version

    def api_version(self, target, request_type, timeout_ms=None):
        self.probes.append(target.node_id)
        if target.node_id in self.cluster.down:
            raise Errors.KafkaConnectionError(f"connection to {target} refused")
        return self._version(target, request_type)

    def send(self, target, request, timeout_ms=None):
        if isinstance(request, ListOffsetsRequest):
            version = self._version(target, request)
            if request._min_version is not None and request._min_version > version:
                raise Errors.IncompatibleBrokerVersion(f"ListOffsets v{request._min_version}+ vs broker v{version}")
            request.API_VERSION = version
            stamps = sorted({p.timestamp for t in request.topics for p in t.partitions})
            self.sent.append((target.node_id, version, stamps, request._min_version))
        return super().send(target, request, timeout_ms)


def make(cluster, clock=None, cost=0.0, transport_class=None, transport_kw=None, **cfg):
    clock = clock or FakeClock()
    cfg.setdefault("bootstrap_servers", ["k1:9092", "k2:9092"])
    transport = (transport_class or FakeTransport)(cluster, clock, cost, **(transport_kw or {}))
    collector = OffsetCollector(transport, CollectorConfig(**cfg), clock=clock, sleep=clock.sleep)
    return collector, transport, clock


def calls_of(cluster, api):
    return [(node, req) for node, name, req in cluster.calls if name == api]


# ---------------------------------------------------------------- KIP-526


def test_metadata_only_for_scoped_topics_in_bounded_batches():
    parts = {(f"t{i:03d}", 0): (1, 0) for i in range(250)}
    parts[("unrelated", 0)] = (1, 0)
    cluster = SimCluster(parts)
    collector, _, _ = make(cluster)
    scope = [f"t{i:03d}" for i in range(250)]
    states = collector.fetch_metadata(scope + scope[:10])  # duplicates are fine
    requests = calls_of(cluster, "MetadataRequest")
    sizes = [len(req.topics) for _, req in requests]
    assert sizes == [100, 100, 50]
    asked = [t.name for _, req in requests for t in req.topics]
    assert sorted(asked) == sorted(scope) and len(asked) == len(set(asked))
    assert "unrelated" not in asked
    assert all(req.allow_auto_topic_creation is False for _, req in requests)
    assert len(states) == 250 and ("unrelated", 0) not in states


def test_metadata_batch_size_is_configurable():
    cluster = SimCluster({(f"t{i}", 0): (1, 0) for i in range(7)})
    collector, _, _ = make(cluster, metadata_batch_size=3)
    collector.fetch_metadata([f"t{i}" for i in range(7)])
    assert [len(r.topics) for _, r in calls_of(cluster, "MetadataRequest")] == [3, 3, 1]


# ---------------------------------------------------- OffsetsForLeaderEpoch


def payments_cluster():
    return SimCluster(
        {("dev.payments", 0): (2, 3), ("dev.payments", 1): (3, 2), ("dev.inventory", 0): (2, 2)},
        caches={
            ("dev.payments", 0): [(0, 0), (1, 40), (3, 60)],
            ("dev.payments", 1): [(0, 0), (2, 50)],
            ("dev.inventory", 0): [(0, 0), (2, 61)],
        },
        log_start={("dev.payments", 0): 0, ("dev.payments", 1): 5, ("dev.inventory", 0): 0},
        log_end={("dev.payments", 0): 120, ("dev.payments", 1): 90, ("dev.inventory", 0): 100},
    )


def test_epoch_end_offsets_from_leader_with_current_epoch():
    cluster = payments_cluster()
    collector, _, _ = make(cluster)
    rows = collector.epoch_end_offsets(
        [
            ("dev.payments", 0, 0),
            ("dev.payments", 0, 2),
            ("dev.payments", 0, 3),
            ("dev.payments", 0, 7),
            ("dev.payments", 1, 0),
            ("dev.payments", 1, 0),  # duplicate answered once
            ("dev.inventory", 0, 2),
            ("dev.inventory", 0, -1),  # -1 is never validated: skipped
        ]
    )
    assert rows == [
        {
            "topic": "dev.inventory",
            "partition": 0,
            "requested_epoch": 2,
            "leader_epoch": 2,
            "end_offset": 100,
            "answered_by_broker": 2,
        },
        {
            "topic": "dev.payments",
            "partition": 0,
            "requested_epoch": 0,
            "leader_epoch": 0,
            "end_offset": 40,
            "answered_by_broker": 2,
        },
        {
            "topic": "dev.payments",
            "partition": 0,
            "requested_epoch": 2,
            "leader_epoch": 1,
            "end_offset": 60,
            "answered_by_broker": 2,
        },
        {
            "topic": "dev.payments",
            "partition": 0,
            "requested_epoch": 3,
            "leader_epoch": 3,
            "end_offset": 120,
            "answered_by_broker": 2,
        },
        {
            "topic": "dev.payments",
            "partition": 0,
            "requested_epoch": 7,
            "leader_epoch": -1,
            "end_offset": -1,
            "answered_by_broker": 2,
        },
        {
            "topic": "dev.payments",
            "partition": 1,
            "requested_epoch": 0,
            "leader_epoch": 0,
            "end_offset": 50,
            "answered_by_broker": 3,
        },
    ]
    ofle = calls_of(cluster, "OffsetForLeaderEpochRequest")
    for node, req in ofle:
        seen = [(t.topic, p.partition) for t in req.topics for p in t.partitions]
        assert len(seen) == len(set(seen)), "a partition appears at most once per request"
        for t in req.topics:
            for p in t.partitions:
                leader, epoch = cluster.partitions[(t.topic, p.partition)]
                assert node == leader
                assert p.current_leader_epoch == epoch
    # four epochs of dev.payments-0 need four requests to broker 2; broker 3 gets one
    assert sorted(node for node, _ in ofle) == [2, 2, 2, 2, 3]
    assert collector.stats["epoch_end_offsets.skipped_negative_epochs"] == 1


@pytest.mark.parametrize("code", [74, 75, 6])  # FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH, NOT_LEADER_OR_FOLLOWER
def test_fencing_errors_refresh_metadata_and_retry(code):
    cluster = payments_cluster()
    collector, _, clock = make(cluster)
    collector.fetch_metadata(["dev.payments"])
    # leadership moves: broker 3 now leads dev.payments-0 in epoch 4
    cluster.partitions[("dev.payments", 0)] = (3, 4)
    cluster.caches[("dev.payments", 0)].append((4, 120))
    # the old leader answers once with the fencing error, as Kafka would after the move
    cluster.partition_errors[("ofle", "dev.payments", 0)] = [code]
    metadata_before = len(calls_of(cluster, "MetadataRequest"))
    rows = collector.epoch_end_offsets([("dev.payments", 0, 3)])
    assert rows == [
        {
            "topic": "dev.payments",
            "partition": 0,
            "requested_epoch": 3,
            "leader_epoch": 3,
            "end_offset": 120,
            "answered_by_broker": 3,
        }
    ]
    ofle = calls_of(cluster, "OffsetForLeaderEpochRequest")
    assert [node for node, _ in ofle] == [2, 3]
    assert ofle[0][1].topics[0].partitions[0].current_leader_epoch == 3
    assert ofle[1][1].topics[0].partitions[0].current_leader_epoch == 4
    assert len(calls_of(cluster, "MetadataRequest")) == metadata_before + 1
    assert clock.sleeps, "retries back off"


def test_fenced_forever_gives_up_after_bounded_retries():
    cluster = payments_cluster()
    collector, _, clock = make(cluster, max_retries=3, retry_backoff_ms=100, retry_backoff_max_ms=10_000)
    cluster.partition_errors[("ofle", "dev.payments", 0)] = [74] * 100
    with pytest.raises(PartitionsUnavailableError) as info:
        collector.epoch_end_offsets([("dev.payments", 0, 1)])
    assert "FENCED_LEADER_EPOCH" in str(info.value) and "dev.payments-0" in str(info.value)
    assert len(calls_of(cluster, "OffsetForLeaderEpochRequest")) == 4  # 1 + 3 retries
    assert clock.sleeps == [0.1, 0.2, 0.4]  # exponential backoff

    cluster.partition_errors[("ofle", "dev.payments", 0)] = [74] * 100
    lenient, _, _ = make(cluster, max_retries=1, fail_on_unavailable=False)
    assert lenient.epoch_end_offsets([("dev.payments", 0, 1), ("dev.payments", 1, 0)]) == [
        {
            "topic": "dev.payments",
            "partition": 1,
            "requested_epoch": 0,
            "leader_epoch": 0,
            "end_offset": 50,
            "answered_by_broker": 3,
        }
    ]
    assert lenient.problems and lenient.problems[0]["topic"] == "dev.payments" and lenient.problems[0]["partition"] == 0


# ---------------------------------------------------------------- KIP-232


def test_stale_metadata_is_ignored_and_refetched():
    cluster = payments_cluster()
    collector, _, clock = make(cluster)
    collector.fetch_metadata(["dev.payments"])
    assert collector.partition_metadata("dev.payments", 0).leader_epoch == 3
    # a lagging broker answers with epoch 2 (older) and another leader; then a fresh answer arrives
    stale = {("dev.payments", 0): (1, 2), ("dev.payments", 1): (3, 2)}
    cluster.metadata_overrides = [lambda names: cluster.metadata_response(names, partitions=stale)]
    n = len(calls_of(cluster, "MetadataRequest"))
    clock.sleeps.clear()
    collector.fetch_metadata(["dev.payments"])
    assert len(calls_of(cluster, "MetadataRequest")) == n + 2, "stale answer triggers a refetch"
    assert clock.sleeps == [0.1]
    state = collector.partition_metadata("dev.payments", 0)
    assert (state.leader_id, state.leader_epoch) == (2, 3)
    assert collector.stats["metadata.stale_partitions_ignored"] == 1


def test_stale_metadata_never_accepted_even_when_it_persists():
    cluster = payments_cluster()
    collector, _, clock = make(cluster, max_retries=4)
    collector.fetch_metadata(["dev.payments"])
    stale = {("dev.payments", 0): (1, 1), ("dev.payments", 1): (3, 2)}
    cluster.metadata_overrides = [lambda names: cluster.metadata_response(names, partitions=stale)] * 50
    clock.sleeps.clear()
    collector.fetch_metadata(["dev.payments"])
    state = collector.partition_metadata("dev.payments", 0)
    assert (state.leader_id, state.leader_epoch) == (2, 3)
    assert collector.stats["metadata.stale_partitions_ignored"] == 5
    assert clock.sleeps == [0.1, 0.2, 0.4, 0.8]
    # the OffsetsForLeaderEpoch request still goes to the newer leader with the newer epoch
    cluster.metadata_overrides = []
    collector.epoch_end_offsets([("dev.payments", 0, 3)])
    node, req = calls_of(cluster, "OffsetForLeaderEpochRequest")[-1]
    assert node == 2 and req.topics[0].partitions[0].current_leader_epoch == 3


# ---------------------------------------------------------------- KIP-1102


def test_rebootstrap_after_trigger_time_when_no_known_broker_answers():
    cluster = payments_cluster()
    collector, transport, clock = make(cluster, cost=10.0, deadline_ms=3_600_000)
    collector.fetch_metadata(["dev.payments"])
    assert [n for n, _ in calls_of(cluster, "MetadataRequest")][0] in ("bootstrap-0", "bootstrap-1")
    # every broker of the current metadata disappears; the cluster now lives on broker 4
    cluster.down = {1, 2, 3}
    cluster.brokers = {4: ("b4", 9092)}
    cluster.partitions = {k: (4, e + 1) for k, (_, e) in cluster.partitions.items()}
    for k, cache in cluster.caches.items():
        cache.append((cluster.partitions[k][1], cluster.log_end[k]))
    start = clock()
    cluster.calls.clear()
    rows = collector.epoch_end_offsets([("dev.payments", 0, 3)])
    assert rows[0]["answered_by_broker"] == 4 and rows[0]["end_offset"] == 120
    nodes = [n for n, _ in calls_of(cluster, "MetadataRequest")]
    first_bootstrap = next(i for i, n in enumerate(nodes) if isinstance(n, str))
    assert first_bootstrap > 0 and all(n in (1, 2, 3) for n in nodes[:first_bootstrap])
    assert transport.closed_connections == 1
    # the rebootstrap happened only once the trigger (300 s) had passed since the first failed attempt
    assert transport.close_times[0] - start >= 300
    assert collector.stats["rebootstraps"] == 1
    assert "metadata.recovery.rebootstrap.trigger.ms" in collector.rebootstrap_reasons[0]


def test_rebootstrap_trigger_is_configurable():
    cluster = payments_cluster()
    collector, transport, clock = make(cluster, cost=1.0, metadata_recovery_rebootstrap_trigger_ms=5_000)
    collector.fetch_metadata(["dev.payments"])
    cluster.down = {1, 2, 3}
    cluster.brokers = {4: ("b4", 9092)}
    start = clock()
    collector.fetch_metadata(["dev.inventory"])
    assert transport.closed_connections == 1
    assert 5 <= transport.close_times[0] - start < 30


def test_rebootstrap_required_error_triggers_immediate_rebootstrap():
    cluster = payments_cluster()
    collector, transport, clock = make(cluster)
    collector.fetch_metadata(["dev.payments"])
    cluster.calls.clear()
    cluster.metadata_overrides = [lambda names: cluster.metadata_response(names, error_code=129)]
    collector.fetch_metadata(["dev.inventory"])
    nodes = [n for n, _ in calls_of(cluster, "MetadataRequest")]
    assert isinstance(nodes[0], int) and isinstance(nodes[1], str) and nodes[1].startswith("bootstrap-")
    assert transport.closed_connections == 1
    assert "REBOOTSTRAP_REQUIRED" in collector.rebootstrap_reasons[0]
    assert collector.partition_metadata("dev.inventory", 0) is not None


def test_strategy_none_never_rebootstraps_and_deadline_error_names_brokers():
    cluster = payments_cluster()
    collector, transport, clock = make(cluster, cost=10.0, metadata_recovery_strategy="none", deadline_ms=900_000)
    collector.fetch_metadata(["dev.payments"])
    cluster.down = {1, 2, 3}
    cluster.calls.clear()
    cluster.metadata_overrides = [lambda names: cluster.metadata_response(names, error_code=129)]
    with pytest.raises(BrokersUnreachableError) as info:
        collector.fetch_metadata(["dev.inventory"])
    assert transport.closed_connections == 0
    assert all(isinstance(n, int) for n, _ in calls_of(cluster, "MetadataRequest"))
    message = str(info.value)
    for name in ("1@b1:9092", "2@b2:9092", "3@b3:9092"):
        assert name in message and name in info.value.brokers
    assert "refused" in message and "900000 ms" in message


def test_unreachable_bootstrap_deadline_error_names_bootstrap_servers():
    cluster = payments_cluster()
    cluster.down = {"bootstrap-0", "bootstrap-1"}
    collector, _, clock = make(cluster, cost=5.0, deadline_ms=60_000)
    with pytest.raises(BrokersUnreachableError) as info:
        collector.fetch_metadata(["dev.payments"])
    assert "bootstrap-0@k1:9092" in str(info.value) and "bootstrap-1@k2:9092" in str(info.value)
    assert clock() - 1000.0 >= 60


# ---------------------------------------------------------------- ListOffsets


def test_bounds_from_leaders():
    """A transport that cannot tell the negotiated versions (no ``api_version``) is never asked for -4."""
    cluster = payments_cluster()
    collector, _, _ = make(cluster)
    rows = collector.log_bounds(["dev.payments"], partitions=[("dev.inventory", 0)])
    assert rows == [
        {
            "topic": "dev.inventory",
            "partition": 0,
            "log_start_offset": 0,
            "local_log_start_offset": None,
            "log_end_offset": 100,
            "high_watermark": 100,
            "leader_id": 2,
            "leader_epoch": 2,
        },
        {
            "topic": "dev.payments",
            "partition": 0,
            "log_start_offset": 0,
            "local_log_start_offset": None,
            "log_end_offset": 120,
            "high_watermark": 120,
            "leader_id": 2,
            "leader_epoch": 3,
        },
        {
            "topic": "dev.payments",
            "partition": 1,
            "log_start_offset": 5,
            "local_log_start_offset": None,
            "log_end_offset": 90,
            "high_watermark": 90,
            "leader_id": 3,
            "leader_epoch": 2,
        },
    ]
    for node, req in calls_of(cluster, "ListOffsetsRequest"):
        specs = {p.timestamp for t in req.topics for p in t.partitions}
        assert len(specs) == 1, "EARLIEST and LATEST go in separate requests"
        assert specs != {-4}
        for t in req.topics:
            for p in t.partitions:
                assert cluster.partitions[(t.name, p.partition_index)] == (node, p.current_leader_epoch)
    assert len(calls_of(cluster, "ListOffsetsRequest")) == 4  # -2 and -1 to brokers 2 and 3


def tiered_cluster():
    """payments_cluster where dev.payments-0 has its first 30 records only in the remote tier."""
    cluster = payments_cluster()
    cluster.local_start = {("dev.payments", 0): 30}
    return cluster


def bounds_by_tp(rows):
    return {(r["topic"], r["partition"]): r for r in rows}


def test_local_log_start_asked_only_where_list_offsets_v8_is_negotiated():
    cluster = tiered_cluster()
    # broker 3 negotiated ListOffsets v7 (a Kafka 3.4 broker): never asked for -4
    collector, transport, _ = make(
        cluster, transport_class=VersionedTransport, transport_kw={"list_offsets_max": {3: 7}}
    )
    rows = bounds_by_tp(collector.log_bounds(["dev.payments"], partitions=[("dev.inventory", 0)]))
    assert {
        tp: (r["log_start_offset"], r["local_log_start_offset"], r["log_end_offset"]) for tp, r in rows.items()
    } == {
        ("dev.inventory", 0): (0, 0, 100),
        ("dev.payments", 0): (0, 30, 120),  # tiered: the local log starts later
        ("dev.payments", 1): (5, None, 90),  # its leader cannot tell
    }
    assert rows[("dev.payments", 1)]["high_watermark"] == 90 and rows[("dev.payments", 1)]["leader_id"] == 3
    sent = sorted(transport.sent)
    assert sent == [
        (2, LO_V, [-4], 8),  # one request of -4 entries for both partitions of broker 2, never below v8
        (2, LO_V, [-2], None),
        (2, LO_V, [-1], None),
        (3, 7, [-2], None),
        (3, 7, [-1], None),
    ]
    (local,) = [
        req
        for node, req in calls_of(cluster, "ListOffsetsRequest")
        if node == 2 and req.topics[0].partitions[0].timestamp == -4
    ]
    assert sorted((t.name, p.partition_index) for t in local.topics for p in t.partitions) == [
        ("dev.inventory", 0),
        ("dev.payments", 0),
    ]
    assert sorted(set(transport.probes)) == [2, 3]
    assert collector.stats["bounds.local_log_start_unknown"] == 1
    assert collector.stats["requests.ListOffsetsRequest"] == 5


def test_local_log_start_equals_log_start_without_tiered_storage():
    cluster = payments_cluster()
    collector, transport, _ = make(cluster, transport_class=VersionedTransport)
    rows = collector.log_bounds(["dev.payments", "dev.inventory"])
    assert [(r["partition"], r["log_start_offset"], r["local_log_start_offset"]) for r in rows] == [
        (0, 0, 0),
        (0, 0, 0),
        (1, 5, 5),
    ]
    assert len(transport.sent) == 6  # -4, -2 and -1 to each of brokers 2 and 3, in one round
    assert not collector.stats["bounds.local_log_start_unknown"]


@pytest.mark.parametrize("code", [35, 42, -1, 29])  # UNSUPPORTED_VERSION, INVALID_REQUEST, UNKNOWN_SERVER_ERROR, ACL
def test_error_on_the_local_log_start_entry_alone_gives_none(code):
    cluster = tiered_cluster()
    cluster.partition_errors[("list-4", "dev.payments", 0)] = [code]
    collector, transport, clock = make(cluster, transport_class=VersionedTransport)
    rows = bounds_by_tp(collector.log_bounds(["dev.payments"]))
    assert rows[("dev.payments", 0)]["local_log_start_offset"] is None
    assert (rows[("dev.payments", 0)]["log_start_offset"], rows[("dev.payments", 0)]["log_end_offset"]) == (0, 120)
    assert rows[("dev.payments", 1)]["local_log_start_offset"] == 5
    assert len(transport.sent) == 6, "not retried"
    assert not clock.sleeps and not collector.problems
    assert collector.stats["bounds.local_log_start_unknown"] == 1


def test_retriable_error_on_the_local_log_start_entry_is_retried_then_dropped():
    cluster = tiered_cluster()
    cluster.partition_errors[("list-4", "dev.payments", 0)] = [6]  # NOT_LEADER_OR_FOLLOWER once
    collector, transport, _ = make(cluster, transport_class=VersionedTransport)
    rows = bounds_by_tp(collector.log_bounds(["dev.payments"]))
    assert rows[("dev.payments", 0)]["local_log_start_offset"] == 30
    assert transport.sent[-1] == (2, LO_V, [-4], 8) and len(transport.sent) == 7

    cluster.partition_errors[("list-4", "dev.payments", 0)] = [74] * 100  # fenced for good
    collector, transport, _ = make(cluster, transport_class=VersionedTransport, max_retries=2)
    rows = bounds_by_tp(collector.log_bounds(["dev.payments"]))  # neither raises nor loses the bounds
    assert (rows[("dev.payments", 0)]["log_start_offset"], rows[("dev.payments", 0)]["local_log_start_offset"]) == (
        0,
        None,
    )
    assert rows[("dev.payments", 1)]["local_log_start_offset"] == 5
    assert not collector.problems and len(transport.sent) == 6 + 2


def test_local_log_start_left_out_when_versions_are_unknown_or_refused():
    # the version probe fails (connection refused) while the leader is down: the bounds wait for the leader as
    # before; once it is back the -4 entries go out with the others
    cluster = tiered_cluster()
    collector, transport, _ = make(cluster, transport_class=VersionedTransport)
    collector.fetch_metadata(["dev.payments"])
    cluster.down = {2}
    real_send = transport.send

    def send(target, request, timeout_ms=None):
        if len(transport.sent) >= 2:  # broker 2 comes back after the first round
            cluster.down = set()
        return real_send(target, request, timeout_ms)

    transport.send = send
    rows = bounds_by_tp(collector.log_bounds(["dev.payments"]))
    assert rows[("dev.payments", 0)]["local_log_start_offset"] == 30

    # the broker was downgraded between the probe and the send: kafka-python refuses to send -4 below v8
    cluster = tiered_cluster()
    collector, transport, _ = make(cluster, transport_class=VersionedTransport)
    versions = iter([LO_V, LO_V])
    transport.api_version = lambda target, request_type, timeout_ms=None: next(versions, 7)
    transport.list_offsets_max = {2: 7, 3: 7}
    rows = bounds_by_tp(collector.log_bounds(["dev.payments"]))
    assert [r["local_log_start_offset"] for r in rows.values()] == [None, None]
    assert [(r["log_start_offset"], r["log_end_offset"]) for r in rows.values()] == [(0, 120), (5, 90)]
    assert all(-4 not in stamps for _, _, stamps, _ in transport.sent)
    assert not collector._failures, "a request kafka-python refused to send is no broker failure"


def test_collect_combines_both_tables_with_one_metadata_pass():
    cluster = payments_cluster()
    collector, _, _ = make(cluster)
    result = collector.collect([("dev.payments", 0, 0), ("dev.payments", 1, 2)])
    assert [(r["topic"], r["partition"], r["end_offset"]) for r in result.epoch_end_offsets] == [
        ("dev.payments", 0, 40),
        ("dev.payments", 1, 90),
    ]
    assert [(r["topic"], r["partition"]) for r in result.bounds] == [("dev.payments", 0), ("dev.payments", 1)]
    assert len(calls_of(cluster, "MetadataRequest")) == 1
    assert result.stats["requests.MetadataRequest"] == 1


def test_missing_topic_is_a_problem_not_a_failure():
    cluster = payments_cluster()
    collector, _, _ = make(cluster)
    result = collector.collect([("deleted.topic", 0, 1), ("dev.payments", 1, 0)])
    assert [r["topic"] for r in result.epoch_end_offsets] == ["dev.payments"]
    assert {
        "stage": "metadata",
        "topic": "deleted.topic",
        "partition": None,
        "error": "UNKNOWN_TOPIC_OR_PARTITION",
    } in result.problems
    assert collector.missing_topics == {"deleted.topic": "UNKNOWN_TOPIC_OR_PARTITION"}


def test_unknown_partition_is_reported():
    cluster = payments_cluster()
    collector, _, _ = make(cluster)
    rows = collector.epoch_end_offsets([("dev.payments", 9, 0)])
    assert rows == []
    assert any(p["partition"] == 9 and "UNKNOWN_PARTITION" in p["error"] for p in collector.problems)


# ---------------------------------------------------------------- errors


def test_topic_authorization_failed_names_describe_acl():
    cluster = payments_cluster()
    original = cluster.metadata_response

    def denied(names, **kw):
        response = original(names, **kw)
        for t in response.topics:
            if t.name == "dev.payments":
                t.error_code, t.partitions = 29, []
        return response

    cluster.metadata_response = denied
    collector, _, _ = make(cluster)
    with pytest.raises(MissingAclError) as info:
        collector.fetch_metadata(["dev.payments", "dev.inventory"])
    assert info.value.operation == "DESCRIBE" and info.value.resource_type == "TOPIC"
    assert info.value.resources == ["dev.payments"]
    assert "Topic:dev.payments" in str(info.value)


def test_offsets_for_leader_epoch_authorization_failure():
    cluster = payments_cluster()
    cluster.partition_errors[("ofle", "dev.payments", 1)] = [29]
    collector, _, _ = make(cluster)
    with pytest.raises(MissingAclError) as info:
        collector.epoch_end_offsets([("dev.payments", 1, 0)])
    assert "DESCRIBE" in str(info.value) and "OffsetsForLeaderEpoch" in str(info.value)


def test_authentication_failure_is_not_retried_and_names_broker():
    calls = []

    def send(target, request):
        calls.append(target)
        raise Errors.SaslAuthenticationFailedError("Authentication failed: invalid credentials for s3cretPW!")

    parse_client_properties(
        {
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "PLAIN",
            "sasl.jaas.config": "org.apache.kafka.common.security.plain.PlainLoginModule "
            'required username="u" password="s3cretPW!";',
            "ssl.truststore.location": "/x/ca.pem",
        }
    )
    collector = OffsetCollector(send, CollectorConfig(bootstrap_servers="k1:9092"))
    with pytest.raises(AuthenticationFailedError) as info:
        collector.fetch_metadata(["t"])
    assert len(calls) == 1
    assert "bootstrap-0@k1:9092" in str(info.value) and info.value.broker == "bootstrap-0@k1:9092"
    assert "s3cretPW!" not in str(info.value)


def test_plain_callable_transport():
    cluster = payments_cluster()
    collector = OffsetCollector(
        lambda target, request: cluster.handle(target, request), CollectorConfig(bootstrap_servers=["k1:9092"])
    )
    assert collector.epoch_end_offsets([("dev.payments", 1, 2)])[0]["end_offset"] == 90


def test_requests_fan_out_with_bounded_concurrency():
    parts = {(f"t{i}", 0): (i, 0) for i in range(1, 6)}
    cluster = SimCluster(
        parts,
        brokers={i: (f"b{i}", 9092) for i in range(1, 6)},
        caches={k: [(0, 0)] for k in parts},
        log_end={k: 10 for k in parts},
    )
    state = {"now": 0, "max": 0}
    lock = threading.Lock()

    class SlowTransport(FakeTransport):
        def send(self, target, request, timeout_ms=None):
            if not isinstance(request, OffsetForLeaderEpochRequest):
                return super().send(target, request, timeout_ms)
            with lock:
                state["now"] += 1
                state["max"] = max(state["max"], state["now"])
            time.sleep(0.05)
            with lock:
                state["now"] -= 1
            return super().send(target, request, timeout_ms)

    collector = OffsetCollector(SlowTransport(cluster), CollectorConfig(bootstrap_servers="k1:9092", max_concurrency=2))
    rows = collector.epoch_end_offsets([(f"t{i}", 0, 0) for i in range(1, 6)])
    assert [r["answered_by_broker"] for r in rows] == [1, 2, 3, 4, 5]
    assert state["max"] == 2


def test_collector_config_from_client_config():
    cc = parse_client_properties(
        {
            "bootstrap.servers": "x1:9093,x2:9093",
            "request.timeout.ms": "1234",
            "metadata.recovery.strategy": "none",
            "metadata.recovery.rebootstrap.trigger.ms": "60000",
            "retry.backoff.ms": "50",
            "retry.backoff.max.ms": "800",
            "default.api.timeout.ms": "90000",
        }
    )
    cfg = CollectorConfig.from_client_config(cc, max_concurrency=3)
    assert cfg.bootstrap_servers == ["x1:9093", "x2:9093"]
    assert (
        cfg.request_timeout_ms,
        cfg.metadata_recovery_strategy,
        cfg.metadata_recovery_rebootstrap_trigger_ms,
        cfg.retry_backoff_ms,
        cfg.retry_backoff_max_ms,
        cfg.deadline_ms,
        cfg.max_concurrency,
    ) == (1234, "none", 60000, 50, 800, 90000, 3)
    defaults = CollectorConfig.from_client_config(parse_client_properties({"bootstrap.servers": "a:1"}))
    assert defaults.metadata_recovery_strategy == "rebootstrap"
    assert defaults.metadata_recovery_rebootstrap_trigger_ms == 300000
    assert defaults.metadata_batch_size == 100


# ------------------------------------------------- real transport, loopback


class LoopbackBroker:
    """A minimal Kafka-protocol server on 127.0.0.1 backed by a SimCluster."""

    REQUESTS = {18: ApiVersionsRequest, 3: MetadataRequest, 23: OffsetForLeaderEpochRequest, 2: ListOffsetsRequest}

    def __init__(self, cluster, node_id, max_versions=None):
        self.cluster = cluster
        self.node_id = node_id
        self.max_versions = dict(max_versions or {})  # api key -> highest version advertised (default: client's)
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]
        self.stop = False
        self.seen: list = []
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _read(self, conn, n):
        buf = b""
        while len(buf) < n:
            chunk = conn.recv(n - len(buf))
            if not chunk:
                raise EOFError
            buf += chunk
        return buf

    def _serve(self):
        self.sock.settimeout(0.2)
        while not self.stop:
            try:
                conn, _ = self.sock.accept()
            except (socket.timeout, OSError):
                continue
            threading.Thread(target=self._conn, args=(conn,), daemon=True).start()

    def _conn(self, conn):
        try:
            while True:
                size = struct.unpack(">i", self._read(conn, 4))[0]
                payload = self._read(conn, size)
                api_key, version = struct.unpack(">hh", payload[:4])
                cls = self.REQUESTS[api_key]
                request = cls.decode(payload, version=version, header=True)
                correlation_id = request.header.correlation_id
                self.seen.append((api_key, version))
                if api_key == 18:
                    response = ApiVersionsResponse(
                        error_code=0,
                        throttle_time_ms=0,
                        api_keys=[
                            ApiVersionsResponse.ApiVersion(
                                api_key=k, min_version=0, max_version=self.max_versions.get(k, c.max_version)
                            )
                            for k, c in sorted(self.REQUESTS.items())
                        ],
                    )
                else:
                    target = Broker(self.node_id, "127.0.0.1", self.port)
                    request.API_VERSION = version
                    response = self.cluster.handle(target, request)
                response.API_VERSION = version
                response.with_header(correlation_id=correlation_id)
                conn.sendall(response.encode(header=True, framed=True))
        except (EOFError, OSError):
            pass
        finally:
            conn.close()

    def close(self):
        self.stop = True
        self.sock.close()


def test_real_kafka_python_transport_over_loopback():
    cluster = payments_cluster()
    servers = {n: LoopbackBroker(cluster, n) for n in (1, 2, 3)}
    bootstrap = LoopbackBroker(cluster, "bootstrap-0")
    cluster.brokers = {n: ("127.0.0.1", s.port) for n, s in servers.items()}
    transport = KafkaPythonTransport({"request_timeout_ms": 5000, "client_id": "audit-test"})
    try:
        collector = OffsetCollector(
            transport, CollectorConfig(bootstrap_servers=[f"127.0.0.1:{bootstrap.port}"], deadline_ms=20_000)
        )
        result = collector.collect([("dev.payments", 0, 1), ("dev.payments", 1, 2)])
        assert result.epoch_end_offsets == [
            {
                "topic": "dev.payments",
                "partition": 0,
                "requested_epoch": 1,
                "leader_epoch": 1,
                "end_offset": 60,
                "answered_by_broker": 2,
            },
            {
                "topic": "dev.payments",
                "partition": 1,
                "requested_epoch": 2,
                "leader_epoch": 2,
                "end_offset": 90,
                "answered_by_broker": 3,
            },
        ]
        assert [
            (r["partition"], r["log_start_offset"], r["local_log_start_offset"], r["log_end_offset"])
            for r in result.bounds
        ] == [(0, 0, 0, 120), (1, 5, 5, 90)]
        assert (2, ListOffsetsRequest.max_version) in servers[2].seen
        assert (3, MetadataRequest.max_version) in bootstrap.seen
        assert any(k == 23 for k, _ in servers[2].seen) and any(k == 2 for k, _ in servers[3].seen)
        transport.close_connections()  # KIP-1102 path: closing is safe and reconnects on demand
        again = collector.epoch_end_offsets([("dev.inventory", 0, 2)])
        assert again[0]["end_offset"] == 100
    finally:
        transport.close()
        for s in [*servers.values(), bootstrap]:
            s.close()


def test_real_transport_asks_local_log_start_only_where_v8_is_negotiated():
    """kafka-python's ApiVersions negotiation decides: broker 3 advertises ListOffsets up to v7 (Kafka 3.4)."""
    cluster = tiered_cluster()
    servers = {n: LoopbackBroker(cluster, n, max_versions={2: 7} if n == 3 else None) for n in (1, 2, 3)}
    bootstrap = LoopbackBroker(cluster, "bootstrap-0")
    cluster.brokers = {n: ("127.0.0.1", s.port) for n, s in servers.items()}
    transport = KafkaPythonTransport({"request_timeout_ms": 5000, "client_id": "audit-test"})
    try:
        collector = OffsetCollector(
            transport, CollectorConfig(bootstrap_servers=[f"127.0.0.1:{bootstrap.port}"], deadline_ms=20_000)
        )
        rows = collector.log_bounds(["dev.payments", "dev.inventory"])
        assert [
            (r["topic"], r["partition"], r["log_start_offset"], r["local_log_start_offset"], r["log_end_offset"])
            for r in rows
        ] == [("dev.inventory", 0, 0, 0, 100), ("dev.payments", 0, 0, 30, 120), ("dev.payments", 1, 5, None, 90)]
        assert transport.api_version(Broker(3, "127.0.0.1", servers[3].port), ListOffsetsRequest) == 7
        assert transport.api_version(Broker(2, "127.0.0.1", servers[2].port), ListOffsetsRequest) == LO_V
        assert {v for k, v in servers[3].seen if k == 2} == {7}
        assert {v for k, v in servers[2].seen if k == 2} == {LO_V}
        stamps = {
            (node, p.timestamp)
            for node, req in calls_of(cluster, "ListOffsetsRequest")
            for t in req.topics
            for p in t.partitions
        }
        assert stamps == {(2, -4), (2, -2), (2, -1), (3, -2), (3, -1)}
        assert collector.stats["requests.ListOffsetsRequest"] == 5
    finally:
        transport.close()
        for s in [*servers.values(), bootstrap]:
            s.close()


def test_real_transport_connection_refused_is_a_broker_failure():
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()  # nothing listens there any more
    transport = KafkaPythonTransport(
        {
            "request_timeout_ms": 1000,
            "socket_connection_setup_timeout_ms": 500,
            "socket_connection_setup_timeout_max_ms": 500,
        }
    )
    try:
        collector = OffsetCollector(
            transport,
            CollectorConfig(
                bootstrap_servers=[f"127.0.0.1:{port}"], deadline_ms=1500, retry_backoff_ms=50, retry_backoff_max_ms=200
            ),
        )
        with pytest.raises(BrokersUnreachableError) as info:
            collector.fetch_metadata(["t"])
        assert f"bootstrap-0@127.0.0.1:{port}" in str(info.value)
    finally:
        transport.close()


def test_error_messages_are_redacted():
    parse_client_properties(
        {
            "sasl.jaas.config": "org.apache.kafka.common.security.plain.PlainLoginModule "
            'required username="u" password="hunter2-secret";'
        }
    )

    def send(target, request):
        raise Errors.KafkaConnectionError("peer said hunter2-secret")

    collector = OffsetCollector(
        send,
        CollectorConfig(bootstrap_servers="k1:9092", deadline_ms=300, retry_backoff_ms=100, retry_backoff_max_ms=100),
    )
    with pytest.raises(BrokersUnreachableError) as info:
        collector.fetch_metadata(["t"])
    assert "hunter2-secret" not in str(info.value)
    assert "[redacted]" in str(info.value)
    assert redact("x hunter2-secret y") == "x [redacted] y"
