"""Errors of the live-cluster collector and Kafka's error codes.

The error codes come from kafka-python's catalogue (``kafka.errors``: one class
per code), plus REBOOTSTRAP_REQUIRED (KIP-1102), for which kafka-python has no
class.  :class:`CollectorError` and its subclasses are what the collector raises;
their messages are redacted.
"""

from __future__ import annotations

import ssl
from typing import Any, Iterable, Mapping, Sequence

import kafka.errors as Errors

from ..client_config import redact

# ------------------------------------------------------------- error codes

# Kafka's error codes, from kafka-python's catalogue (kafka.errors: one class per code)
NONE = Errors.NoError.errno
UNKNOWN_TOPIC_OR_PARTITION = Errors.UnknownTopicOrPartitionError.errno
LEADER_NOT_AVAILABLE = Errors.LeaderNotAvailableError.errno
NOT_LEADER_OR_FOLLOWER = Errors.NotLeaderForPartitionError.errno  # Kafka's name since 2.6 (KIP-392)
REQUEST_TIMED_OUT = Errors.RequestTimedOutError.errno
REPLICA_NOT_AVAILABLE = Errors.ReplicaNotAvailableError.errno
NETWORK_EXCEPTION = Errors.NetworkExceptionError.errno
INVALID_TOPIC_EXCEPTION = Errors.InvalidTopicError.errno
TOPIC_AUTHORIZATION_FAILED = Errors.TopicAuthorizationFailedError.errno
GROUP_AUTHORIZATION_FAILED = Errors.GroupAuthorizationFailedError.errno
CLUSTER_AUTHORIZATION_FAILED = Errors.ClusterAuthorizationFailedError.errno
KAFKA_STORAGE_ERROR = Errors.KafkaStorageError.errno
FENCED_LEADER_EPOCH = Errors.FencedLeaderEpochError.errno
UNKNOWN_LEADER_EPOCH = Errors.UnknownLeaderEpochError.errno
OFFSET_NOT_AVAILABLE = Errors.OffsetNotAvailableError.errno
UNKNOWN_TOPIC_ID = Errors.UnknownTopicIdError.errno
#: KIP-1102 (Metadata v13 top-level error, Kafka 4.0+): kafka-python 3.0 has no class for it
REBOOTSTRAP_REQUIRED = 129

#: Partition errors after which the collector refreshes metadata and retries (KIP-320).
RETRY_WITH_REFRESH = frozenset(
    {
        UNKNOWN_TOPIC_OR_PARTITION,
        LEADER_NOT_AVAILABLE,
        NOT_LEADER_OR_FOLLOWER,
        REQUEST_TIMED_OUT,
        NETWORK_EXCEPTION,
        KAFKA_STORAGE_ERROR,
        FENCED_LEADER_EPOCH,
        UNKNOWN_LEADER_EPOCH,
        OFFSET_NOT_AVAILABLE,
        UNKNOWN_TOPIC_ID,
    }
)


def error_name(code: int) -> str:
    """Kafka protocol error name for ``code`` (``FENCED_LEADER_EPOCH``)."""
    if code == REBOOTSTRAP_REQUIRED:
        return "REBOOTSTRAP_REQUIRED"
    err = Errors.for_code(code)
    name = getattr(err, "message", None)
    if not name or err.__name__ == "UnrecognizedBrokerError":
        return f"ERROR_{code}"
    if code == NOT_LEADER_OR_FOLLOWER:
        return "NOT_LEADER_OR_FOLLOWER"
    return name


# ------------------------------------------------------------------ errors


class CollectorError(RuntimeError):
    """Base class of every collector failure. Messages are redacted."""

    def __init__(self, message: str):
        super().__init__(redact(message))


class BrokersUnreachableError(CollectorError):
    """No metadata could be obtained from any broker before the deadline.

    ``brokers``: the brokers tried, as ``"<node_id>@<host>:<port>"`` strings.
    """

    def __init__(self, message: str, brokers: Sequence[str]):
        super().__init__(message)
        self.brokers = list(brokers)


class DeadlineExceededError(CollectorError):
    """The total deadline passed while requests were still failing.

    ``brokers``: the brokers involved; ``pending``: what was still unanswered.
    """

    def __init__(self, message: str, brokers: Sequence[str] = (), pending: Sequence[Any] = ()):
        super().__init__(message)
        self.brokers = list(brokers)
        self.pending = list(pending)


class AuthenticationFailedError(CollectorError):
    """SASL or TLS authentication with a broker failed (not retried)."""

    def __init__(self, message: str, broker: str):
        super().__init__(message)
        self.broker = broker


class MissingAclError(CollectorError):
    """The principal lacks an ACL.

    ``operation`` (``DESCRIBE``/``READ``...), ``resource_type`` (``TOPIC``/``GROUP``/``CLUSTER``), ``resources``
    (names).
    """

    def __init__(self, message: str, operation: str, resource_type: str, resources: Sequence[str]):
        super().__init__(message)
        self.operation = operation
        self.resource_type = resource_type
        self.resources = sorted(resources)


class PartitionsUnavailableError(CollectorError):
    """Some partitions stayed unanswered after the bounded retries.

    ``partitions``: ``{(topic, partition[, key]): last error text}``.
    """

    def __init__(self, message: str, partitions: Mapping[Any, str]):
        super().__init__(message)
        self.partitions = dict(partitions)


def acl_hint(code: int, resources: Iterable[str], api: str) -> MissingAclError:
    """Build the :class:`MissingAclError` for an authorization error ``code`` returned by ``api`` on ``resources``.

    ``api`` is ``Metadata``, ``OffsetsForLeaderEpoch``, ``ListOffsets`` or ``Fetch``.  KIP-320 made
    OffsetsForLeaderEpoch require DESCRIBE on the topic (CLUSTER_ACTION on the cluster before that); reading
    ``__consumer_offsets`` needs READ on that topic.
    """
    resources = sorted(set(resources))
    names = ", ".join(resources[:10]) + (f" (+{len(resources) - 10} more)" if len(resources) > 10 else "")
    if code == TOPIC_AUTHORIZATION_FAILED:
        op = "READ" if api == "Fetch" else "DESCRIBE"
        return MissingAclError(
            f"TOPIC_AUTHORIZATION_FAILED from {api}: the client principal needs {op} on Topic:{names} "
            f"(kafka-acls --add --operation {op.capitalize()} --topic <name> --allow-principal <principal>)",
            op,
            "TOPIC",
            resources,
        )
    if code == GROUP_AUTHORIZATION_FAILED:
        return MissingAclError(
            f"GROUP_AUTHORIZATION_FAILED from {api}: the client principal needs READ on Group:{names}",
            "READ",
            "GROUP",
            resources,
        )
    return MissingAclError(
        f"CLUSTER_AUTHORIZATION_FAILED from {api} on {names}: brokers older than Kafka 2.1 require "
        "CLUSTER_ACTION on the Cluster for OffsetsForLeaderEpoch; newer ones need DESCRIBE on the topic",
        "CLUSTER_ACTION",
        "CLUSTER",
        resources,
    )


def is_auth_failure(exc: BaseException) -> bool:
    """Tell whether ``exc`` is a SASL or TLS authentication failure (never retried)."""
    if isinstance(
        exc,
        (
            Errors.SaslAuthenticationFailedError,
            Errors.UnsupportedSaslMechanismError,
            Errors.IllegalSaslStateError,
            ssl.SSLCertVerificationError,
        ),
    ):
        return True
    text = str(exc)
    return "CERTIFICATE_VERIFY_FAILED" in text or "SaslAuthenticationFailed" in text


def authentication_failed(broker: Any, exc: BaseException) -> AuthenticationFailedError:
    """Build the :class:`AuthenticationFailedError` for an authentication failure ``exc`` with ``broker``."""
    return AuthenticationFailedError(
        f"authentication with broker {broker} failed: {redact(exc)}; check security.protocol, "
        "sasl.mechanism, sasl.jaas.config username/password and the ssl.* trust/key stores",
        str(broker),
    )
