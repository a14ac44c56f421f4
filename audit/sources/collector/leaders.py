"""Requests to the partitions' leaders, retried until every partition is answered.

:meth:`LeaderRequests._leader_round_trips` is the loop that OffsetsForLeaderEpoch
and ListOffsets share: it routes each entry to its partition's leader from the
accepted metadata, batches them per leader (a partition at most once per
request), sends the batches with at most ``max_concurrency`` in flight, and on a
retriable error (KIP-320 fencing, a moved leader ...) refreshes metadata and
retries with exponential backoff, under the deadline of the public call.
"""

from __future__ import annotations

import logging
from collections import Counter, defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Sequence

import kafka.errors as Errors

from ..client_config import redact
from .errors import (
    CLUSTER_AUTHORIZATION_FAILED,
    NONE,
    RETRY_WITH_REFRESH,
    TOPIC_AUTHORIZATION_FAILED,
    CollectorError,
    DeadlineExceededError,
    PartitionsUnavailableError,
    acl_hint,
    authentication_failed,
    error_name,
    is_auth_failure,
)
from .metadata import MetadataCache, chunks
from .model import Broker
from .transport import BrokerFailure

# the package's logger: records keep the name ``audit.sources.collector``
log = logging.getLogger(__package__)


def partition_layers(entries: Sequence[tuple]) -> list[list[tuple]]:
    """Split entries so that every (topic, partition) appears at most once per layer.

    A request may name a partition only once.
    """
    layers: list[list[tuple]] = []
    depth: Counter = Counter()
    for e in entries:
        tp = (e[0], e[1])
        i = depth[tp]
        depth[tp] += 1
        if i == len(layers):
            layers.append([])
        layers[i].append(e)
    return layers


@dataclass
class PendingEntries:
    """The entries of one :meth:`LeaderRequests._leader_round_trips` call still unanswered.

    ``last_error``: why each one is still pending; ``involved``: the brokers asked (``str(broker)``);
    ``is_optional`` / ``on_skip``: as ``optional`` / ``on_skip`` of the call.
    """

    pending: dict[tuple, None]
    is_optional: Callable[[tuple], bool]
    on_skip: Callable[[tuple, str], None] | None = None
    last_error: dict[tuple, str] = field(default_factory=dict)
    involved: set[str] = field(default_factory=set)

    def skip(self, e: tuple, reason: str) -> None:
        """Drop ``e`` unanswered and tell ``on_skip``."""
        self.pending.pop(e, None)
        if self.on_skip is not None:
            self.on_skip(e, reason)

    def skip_optional(self) -> None:
        """Drop every optional entry still pending."""
        for e in [e for e in self.pending if self.is_optional(e)]:
            self.skip(e, self.last_error.get(e, "no answer"))


class LeaderRequests(MetadataCache):
    """Requests routed to the partitions' leaders (:meth:`_leader_round_trips`)."""

    def _leader_round_trips(
        self,
        stage: str,
        entries: list[tuple],
        build: Callable[[list[tuple]], Any],
        parse: Callable[[Any], Iterable[tuple]],
        on_ok: Callable[[tuple, Broker, Any], None],
        api: str,
        optional: Callable[[tuple], bool] | None = None,
        admits: Callable[[Broker], bool | None] | None = None,
        on_skip: Callable[[tuple, str], None] | None = None,
    ) -> None:
        """Send ``entries`` (``(topic, partition, ...)``) to the partitions' leaders until each is answered.

        ``optional(entry)`` marks entries the call may leave unanswered: they go only to a leader for which
        ``admits(leader)`` is True (False, or no ``admits``: dropped; None or an exception: not known yet, kept
        for the next round), and a
        non-retriable error code, an ``IncompatibleBrokerVersion`` from the transport, or retries / the
        deadline running out drop them instead of failing the call; ``on_skip(entry, reason)`` is told of
        every dropped one.  Retriable errors retry them like the others.
        """
        todo = PendingEntries(dict.fromkeys(entries), optional or (lambda e: False), on_skip)
        attempt = 0
        while todo.pending:
            if self._remaining() <= 0:
                todo.skip_optional()
                if not todo.pending:
                    break
                raise self._deadline_exceeded(api, todo)
            refresh: set[str] = set()
            by_leader = self._route_to_leaders(stage, todo, attempt, refresh)
            if optional is not None:
                self._hold_back_optional(by_leader, todo, api, admits)
            jobs = self._leader_jobs(by_leader, build, todo)
            outcomes = self._fan_out([(b, req) for b, _, req in jobs]) if jobs else []
            denied: dict[int, set[str]] = defaultdict(set)
            for (broker, chunk, _), outcome in zip(jobs, outcomes):
                self._take_outcome(broker, chunk, outcome, parse, on_ok, api, todo, refresh, denied)
            for code, names in denied.items():
                raise acl_hint(code, names, api)
            if not todo.pending:
                break
            attempt += 1
            if attempt > self.config.max_retries:
                self._give_up(stage, api, todo)
                break
            self._backoff_sleep(attempt)
            if refresh:
                self.fetch_metadata(sorted(refresh - set(self._missing_topics)))

    def _deadline_exceeded(self, api: str, todo: PendingEntries) -> DeadlineExceededError:
        """Build the error for entries still pending when the deadline passed."""
        return DeadlineExceededError(
            f"{api}: {len(todo.pending)} request(s) still unanswered when the {self.config.deadline_ms} ms "
            f"deadline passed; brokers involved: {self._describe_brokers(sorted(todo.involved))}; e.g. "
            + "; ".join(f"{e[0]}-{e[1]}: {todo.last_error.get(e, 'no answer')}" for e in list(todo.pending)[:5]),
            sorted(todo.involved),
            list(todo.pending),
        )

    def _route_to_leaders(
        self, stage: str, todo: PendingEntries, attempt: int, refresh: set[str]
    ) -> dict[int, list[tuple]]:
        """Group the pending entries by the node id of their partition's leader.

        An entry of a missing topic, or of a partition its topic's metadata does not have (after the first round),
        is dropped as a problem; one without a known leader stays pending and its topic is added to ``refresh``.
        """
        pending, last_error = todo.pending, todo.last_error
        by_leader: dict[int, list[tuple]] = defaultdict(list)
        for e in list(pending):
            topic, partition = e[0], e[1]
            meta = self._partitions.get((topic, partition))
            if topic in self._missing_topics:
                self._problem(stage, topic, partition, self._missing_topics[topic])
                pending.pop(e)
                continue
            if meta is None:
                if topic in self._topic_partitions and partition not in self._topic_partitions[topic] and attempt > 0:
                    self._problem(stage, topic, partition, "UNKNOWN_PARTITION (not in topic metadata)")
                    pending.pop(e)
                    continue
                last_error[e] = "no metadata for the partition"
                refresh.add(topic)
                continue
            if meta.leader_id is None or meta.leader_id < 0:
                last_error[e] = "partition has no leader (offline)"
                refresh.add(topic)
                continue
            if meta.leader_id not in self._brokers:
                last_error[e] = f"leader {meta.leader_id} is not in the broker list"
                refresh.add(topic)
                continue
            by_leader[meta.leader_id].append(e)
        return by_leader

    def _hold_back_optional(
        self,
        by_leader: dict[int, list[tuple]],
        todo: PendingEntries,
        api: str,
        admits: Callable[[Broker], bool | None] | None,
    ) -> None:
        """Take the optional entries out of ``by_leader`` for every leader that ``admits`` does not admit.

        They are dropped when it says False (or there is no ``admits``), kept pending for the next round when not
        known yet.
        """
        asking = [n for n in sorted(by_leader) if any(todo.is_optional(e) for e in by_leader[n])]
        support = self._admissions([self._brokers[n] for n in asking], admits)
        for node_id in asking:
            verdict = support[node_id]
            if verdict:
                continue
            broker = self._brokers[node_id]
            kept = []
            for e in by_leader[node_id]:
                if not todo.is_optional(e):
                    kept.append(e)
                elif verdict is None:
                    todo.last_error[e] = f"{api} versions of leader {broker} not known yet"
                else:
                    todo.skip(e, f"{api} version unsupported by {broker}")
            by_leader[node_id] = kept

    def _leader_jobs(
        self, by_leader: dict[int, list[tuple]], build: Callable[[list[tuple]], Any], todo: PendingEntries
    ) -> list[tuple[Broker, list[tuple], Any]]:
        """Return ``(leader, chunk, request)`` for every leader's entries.

        A partition appears at most once per request, with at most ``max_partitions_per_request`` entries each.
        """
        jobs: list[tuple[Broker, list[tuple], Any]] = []
        for node_id in sorted(by_leader):
            if not by_leader[node_id]:
                continue
            broker = self._brokers[node_id]
            todo.involved.add(str(broker))
            for layer in partition_layers(by_leader[node_id]):
                for chunk in chunks(layer, self.config.max_partitions_per_request):
                    jobs.append((broker, chunk, build(chunk)))
        return jobs

    def _take_outcome(
        self,
        broker: Broker,
        chunk: list[tuple],
        outcome: Any,
        parse: Callable[[Any], Iterable[tuple]],
        on_ok: Callable[[tuple, Broker, Any], None],
        api: str,
        todo: PendingEntries,
        refresh: set[str],
        denied: dict[int, set[str]],
    ) -> None:
        """Apply the response (or :class:`BrokerFailure`) of ``broker`` to the entries of ``chunk``.

        Answered ones go to ``on_ok``, retriable ones stay pending (their topics added to ``refresh``),
        authorization errors go to ``denied`` (code -> topics).

        Raises
        ------
        CollectorError
            Any other error code.
        """
        last_error = todo.last_error
        if isinstance(outcome, BrokerFailure):
            if isinstance(outcome.error, Errors.IncompatibleBrokerVersion):
                # kafka-python refused to send (the request's min_version is above what the
                # connection negotiated): nothing went out; optional entries are dropped
                for e in chunk:
                    if todo.is_optional(e):
                        todo.skip(e, f"{api} version unsupported by {broker}")
                    else:
                        last_error[e] = f"{broker}: {redact(outcome.error)}"
                return
            self._note_failure(broker, outcome.error)
            for e in chunk:
                last_error[e] = f"leader {broker} unreachable: {redact(outcome.error)}"
                refresh.add(e[0])
            return
        self._note_success(broker)
        answers = {(t, p): (code, payload) for t, p, code, payload in parse(outcome)}
        for e in chunk:
            got = answers.get((e[0], e[1]))
            if got is None:
                last_error[e] = f"partition missing from the {api} response of {broker}"
                refresh.add(e[0])
                continue
            code, payload = got
            retriable = code in RETRY_WITH_REFRESH or Errors.for_code(code).retriable
            if code == NONE:
                on_ok(e, broker, payload)
                todo.pending.pop(e, None)
            elif todo.is_optional(e) and not retriable:
                todo.skip(e, f"{error_name(code)} from {broker}")
            elif code in (TOPIC_AUTHORIZATION_FAILED, CLUSTER_AUTHORIZATION_FAILED):
                denied[code].add(e[0])
            elif retriable:
                self.stats[f"{api}.retry.{error_name(code)}"] += 1
                last_error[e] = f"{error_name(code)} from {broker}"
                refresh.add(e[0])
            else:
                raise CollectorError(f"{api} for {e[0]}-{e[1]} failed at broker {broker}: {error_name(code)}")

    def _give_up(self, stage: str, api: str, todo: PendingEntries) -> None:
        """Give up once retries ran out: drop the optional entries and fail or record the others.

        Raises :class:`PartitionsUnavailableError` for the others (``fail_on_unavailable``) or records them as
        problems.
        """
        todo.skip_optional()
        if not todo.pending:
            return
        unresolved = {e: todo.last_error.get(e, "no answer") for e in todo.pending}
        if self.config.fail_on_unavailable:
            raise PartitionsUnavailableError(
                f"{api}: {len(unresolved)} request(s) unanswered after {self.config.max_retries} "
                f"retries; brokers involved: {self._describe_brokers(sorted(todo.involved))}; "
                + "; ".join(f"{e[0]}-{e[1]}: {err}" for e, err in list(unresolved.items())[:10]),
                unresolved,
            )
        for e, err in unresolved.items():
            self._problem(stage, e[0], e[1], err)

    def _admissions(
        self, brokers: list[Broker], admits: Callable[[Broker], bool | None] | None
    ) -> dict[int | str, bool | None]:
        """Call ``admits(broker)`` for each broker (at most ``max_concurrency`` at once: it may open connections).

        An exception counts as None (not known yet), except SASL/TLS failures, which raise.
        """
        if admits is None:
            return {b.node_id: False for b in brokers}

        def one(broker: Broker) -> bool | None:
            try:
                return admits(broker)
            except Exception as exc:  # noqa: BLE001 - classified below
                if is_auth_failure(exc):
                    raise authentication_failed(broker, exc) from None
                log.debug("API versions of broker %s not known: %s", broker, redact(exc))
                return None

        workers = min(self.config.max_concurrency, len(brokers))
        if workers <= 1:
            return {b.node_id: one(b) for b in brokers}
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="offset-audit") as pool:
            return {b.node_id: v for b, v in zip(brokers, pool.map(one, brokers))}

    def _request_version(self, broker: Broker, request_type: Any) -> int | None:
        """Return the version of ``request_type`` the transport sends to ``broker``, or None when it cannot tell.

        The version is the transport's ``api_version``: the ApiVersions negotiation of the connection.
        """
        probe = getattr(self._transport, "api_version", None)
        if probe is None:
            return None
        version = probe(broker, request_type, self.config.request_timeout_ms)
        return None if version is None else int(version)
