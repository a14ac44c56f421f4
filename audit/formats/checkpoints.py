"""Plain-text state files of a Kafka log dir.

Follows Kafka's ``CheckpointFile`` / ``LeaderEpochCheckpointFile`` /
``OffsetCheckpointFile`` (storage/src/main/java/org/apache/kafka/storage/internals/checkpoint/)
and ``MetaProperties`` (``meta.properties``).  Pure functions; the Spark readers parse the
same formats with SQL in :mod:`audit.sources.logdirs`.
"""

from __future__ import annotations

import re
import unicodedata


__all__ = [
    "PARTITION_DIR",
    "ROOT_CHECKPOINTS",
    "SEGMENT_FILE",
    "SNAPSHOT_FILE",
    "CheckpointError",
    "broker_id_of",
    "checkpoint_header_problem",
    "end_offset_for",
    "parse_leader_epoch_checkpoint",
    "parse_meta_properties",
    "parse_offset_checkpoint",
    "parse_partition_dir",
    "parse_partition_metadata",
]

#: ``<topic>-<partition>`` directory names; ``.../<topic>-<p>.<uuid>-delete`` and ``-future``
#: directories (pending deletion or an in-flight ``alterReplicaLogDirs``) are not live logs.
PARTITION_DIR = re.compile(r"^(?P<topic>.+)-(?P<partition>\d+)$")
#: Segment file names: 20-digit base offset.
SEGMENT_FILE = re.compile(r"^(?P<base>\d{20})\.log$")
#: KRaft snapshot files in ``__cluster_metadata-0``: ``<end offset>-<epoch>.checkpoint``.
SNAPSHOT_FILE = re.compile(r"^(?P<end>\d{20})-(?P<epoch>\d{10})\.checkpoint$")
#: Root checkpoint files of a log dir.
ROOT_CHECKPOINTS = (
    "replication-offset-checkpoint",
    "log-start-offset-checkpoint",
    "recovery-point-offset-checkpoint",
    "cleaner-offset-checkpoint",
)


class CheckpointError(ValueError):
    """A checkpoint file that does not follow Kafka's format; the message says where."""


def parse_partition_dir(name: str) -> tuple[str, int] | None:
    """``"dev.payments-0"`` -> ``("dev.payments", 0)``; None for anything else (incl. ``-delete``/``-future``)."""
    if name.endswith("-delete") or name.endswith("-future") or name.endswith("-stray"):
        return None
    m = PARTITION_DIR.match(name)
    if not m:
        return None
    return m.group("topic"), int(m.group("partition"))


def _int(token: str, bits: int, what: str, line: str) -> int:
    """Parse ``token`` as a signed ``bits``-bit integer (Java ``Integer``/``Long.parseLong``).

    Raises
    ------
    CheckpointError
        Naming the file and the line, when ``token`` is not such an integer.
    """
    try:
        n = int(token)
    except ValueError:
        raise CheckpointError(f"{what}: bad entry {line!r} ({token!r} is not an integer)") from None
    if not -(1 << (bits - 1)) <= n < 1 << (bits - 1):
        raise CheckpointError(f"{what}: bad entry {line!r} ({token} does not fit in int{bits})")
    return n


def checkpoint_header_problem(text: str) -> str | None:
    """Return what is wrong with a Kafka checkpoint file's header, or None when it is sound.

    ``CheckpointFile`` (``CheckpointReadBuffer.read``) accepts an empty file (an empty checkpoint) or a
    version line ``0``, an entry-count line, then exactly that many non-blank entry lines; any other
    shape makes the broker fail to read the file.
    """
    lines = text.splitlines()
    if not lines:
        return None
    if lines[0].strip() != "0":
        return f"unsupported version line {lines[0][:40]!r} (expected 0)"
    try:
        count = int(lines[1])
    except (IndexError, ValueError):
        return "bad entry-count line"
    found = sum(1 for ln in lines[2:] if ln.strip())
    if found != count:
        return f"header says {count} entries, found {found}"
    return None


def _lines(text: str, what: str) -> list[str]:
    problem = checkpoint_header_problem(text)
    if problem:
        raise CheckpointError(f"{what}: {problem}")
    return [ln for ln in text.splitlines()[2:] if ln.strip()]


def parse_leader_epoch_checkpoint(text: str, what: str = "leader-epoch-checkpoint") -> list[tuple[int, int]]:
    """Parse a ``leader-epoch-checkpoint``: ``[(leader_epoch, start_offset), ...]`` ascending.

    Format (``LeaderEpochCheckpointFile``): version ``0``, entry count, then ``epoch offset`` lines
    (epoch an int32, start offset an int64 Kafka offset).  An empty file means an empty cache.
    Raises :class:`CheckpointError` naming the problem (a bad header, a wrong entry count, an
    entry that is not two integers, or one that does not fit its Java type) and nothing else.
    """
    out = []
    for ln in _lines(text, what):
        parts = ln.split()
        if len(parts) != 2:
            raise CheckpointError(f"{what}: bad entry {ln!r}")
        out.append((_int(parts[0], 32, what, ln), _int(parts[1], 64, what, ln)))
    return out


def parse_offset_checkpoint(text: str, what: str = "offset checkpoint") -> dict[tuple[str, int], int]:
    """Parse ``replication-offset-checkpoint`` / ``log-start-offset-checkpoint`` / ... files.

    Format (``OffsetCheckpointFile``): version ``0``, count, then ``topic partition offset``
    (partition an int32, offset an int64 Kafka offset).  Returns ``{(topic, partition): offset}``.
    Raises :class:`CheckpointError` naming the problem, and nothing else.
    """
    out = {}
    for ln in _lines(text, what):
        parts = ln.split()
        if len(parts) != 3:
            raise CheckpointError(f"{what}: bad entry {ln!r}")
        out[(parts[0], _int(parts[1], 32, what, ln))] = _int(parts[2], 64, what, ln)
    return out


def parse_meta_properties(text: str) -> dict[str, str]:
    """``meta.properties`` as a dict (Java properties subset: ``key=value``, ``#`` comments)."""
    out = {}
    for ln in text.splitlines():
        ln = ln.strip()
        if not ln or ln.startswith("#") or ln.startswith("!"):
            continue
        key, _, value = ln.partition("=")
        out[key.strip()] = value.strip()
    return out


#: A Java ``Integer.parseInt`` / ``Long.parseLong`` literal: optional sign, then decimal digits (Java's
#: ``Character.digit`` takes any Unicode decimal digit, as ``\d`` does); no underscores, no blanks.
_JAVA_INT = re.compile(r"[+-]?\d+")


def broker_id_of(props: dict[str, str]) -> int | None:
    """``node.id`` (KRaft) or ``broker.id`` (ZooKeeper mode) from parsed meta.properties.

    The broker reads it with ``Integer.parseInt``: a value that is not an int32 literal (out of range,
    ``1_0``, ``0x10``) gives None, like a missing one, never a number the audit's int ``broker_id``
    columns cannot hold.
    """
    for key in ("node.id", "broker.id"):
        if key in props:
            v = props[key]
            if not _JAVA_INT.fullmatch(v):
                return None
            digits = v.lstrip("+-")
            significant = digits[next((i for i, c in enumerate(digits) if unicodedata.digit(c) != 0), len(digits)) :]
            if len(significant) > 10:  # not an int32, and no int() of thousands of digits (Python refuses those)
                return None
            n = int(significant or "0") * (-1 if v.startswith("-") else 1)
            return n if -(1 << 31) <= n < 1 << 31 else None
    return None


def end_offset_for(cache: list[tuple[int, int]], requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
    """Return what OffsetsForLeaderEpoch answers for ``requested_epoch`` against one replica's cache.

    Kafka's ``LeaderEpochFileCache.endOffsetFor``: the latest epoch -> (epoch, log end offset);
    otherwise the largest cached epoch <= requested with the start offset of the next higher
    epoch; requested below every epoch -> (requested, first start offset); requested above
    every epoch, -1, or an empty cache -> (-1, -1).  Offsets in Kafka offsets.
    """
    if requested_epoch < 0 or not cache:
        return -1, -1
    epochs = [e for e, _ in cache]
    if requested_epoch == epochs[-1]:
        return requested_epoch, log_end_offset
    higher = [(e, s) for e, s in cache if e > requested_epoch]
    if not higher:
        return -1, -1
    floor = [(e, s) for e, s in cache if e <= requested_epoch]
    if not floor:
        return requested_epoch, higher[0][1]
    return floor[-1][0], higher[0][1]


def parse_partition_metadata(text: str) -> tuple[str | None, str | None]:
    """Parse a replica dir's ``partition.metadata`` into ``(topic id, problem)``: exactly one is None.

    Kafka's ``PartitionMetadataFile`` (``storage/.../checkpoint/PartitionMetadataReadBuffer``) writes two lines,
    ``version: 0`` and ``topic_id: <Uuid.toString()>`` (URL-safe base64 of 16 bytes, no padding); any other
    version or a topic id that is not 16 bytes is refused by the broker, and is a problem here.
    """
    import base64
    import binascii

    fields = {}
    for line in text.splitlines():
        if line.strip():
            key, sep, value = line.partition(":")
            if not sep:
                return None, f"line {line[:80]!r} is not 'key: value'"
            fields[key.strip()] = value.strip()
    if fields.get("version") != "0":
        return None, f"version {fields.get('version')!r} is not 0"
    tid = fields.get("topic_id")
    if not tid:
        return None, "no topic_id line"
    try:
        raw = base64.urlsafe_b64decode(tid + "=" * (-len(tid) % 4))
    except (binascii.Error, ValueError):
        raw = b""
    if len(raw) != 16:
        return None, f"topic_id {tid[:40]!r} is not a 16-byte uuid"
    return tid, None
