"""Discover the broker log dirs, their replicas and the files of each below the given roots.

Discovery: the driver lists the given roots (names, sizes, times only) and finds the broker log dirs, their
replicas and the files of each, reading one ``meta.properties`` per log dir for its broker id.

Follows Kafka's on-disk layout (``UnifiedLog``, ``LogSegment``): ``<topic>-<partition>/`` folders of segments,
indexes, snapshots and partition-state files below a log dir holding ``meta.properties`` and the root
checkpoints.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from pyspark.sql import SparkSession

from ...formats.checkpoints import (
    ROOT_CHECKPOINTS,
    SEGMENT_FILE,
    SNAPSHOT_FILE,
    broker_id_of,
    parse_meta_properties,
    parse_partition_dir,
)
from ...io.fs import FileInfo, InputError, list_files, read_small, to_uri

OFFSETS_TOPIC = "__consumer_offsets"
METADATA_TOPIC = "__cluster_metadata"
SHARE_STATE_TOPIC = "__share_group_state"
REMOTE_LOG_METADATA_TOPIC = "__remote_log_metadata"
PARTITION_FILES = {"leader-epoch-checkpoint", "partition.metadata", "quorum-state"}
PARTITION_SUFFIXES = (".log", ".index", ".timeindex", ".snapshot", ".txnindex", ".deleted", ".cleaned", ".swap")
EPOCH_CHECKPOINT, PARTITION_METADATA = "leader-epoch-checkpoint", "partition.metadata"


@dataclass
class Replica:
    """One partition directory in one log dir."""

    broker_id: int
    log_dir: str
    topic: str
    partition: int
    dir_uri: str
    segments: list[tuple[int, str, int]] = field(default_factory=list)  # (base offset, uri, size)
    snapshots: list[tuple[int, str]] = field(default_factory=list)  # KRaft (end offset, uri)
    epoch_checkpoint: str | None = None
    epoch_checkpoint_mtime: int | None = None
    partition_metadata: str | None = None  #: ``partition.metadata`` (the replica's topic id)


@dataclass
class LogDir:
    uri: str
    broker_id: int
    broker_id_known: bool
    files: list[FileInfo]
    root_checkpoints: dict[str, str] = field(default_factory=dict)  # name -> uri


@dataclass
class Inventory:
    """What the listing found: log dirs, their replicas, and notes for the summary."""

    log_dirs: list[LogDir]
    replicas: list[Replica]
    notes: list[str] = field(default_factory=list)


def _parent(uri: str) -> str:
    return uri.rsplit("/", 1)[0]


def _name(uri: str) -> str:
    return uri.rsplit("/", 1)[1]


def discover(spark: SparkSession, roots: list[str]) -> Inventory:
    """List every given root and find the broker log dirs below it.

    A root may be a log dir itself or a folder of log dirs (``brokers/`` holding
    ``broker-1/``, ``broker-2/`` ...).  A log dir is recognised by its ``meta.properties``
    or by ``<topic>-<partition>/`` children holding Kafka partition files.  Broker ids come
    from ``meta.properties`` (``node.id`` or ``broker.id``); a log dir without one gets a
    synthetic negative id (reported in the notes).  Roots that overlap (a folder and a log dir
    inside it, or one dir given twice) are read once: every file counts once.

    Raises :class:`InputError` for a missing root, or a root with no Kafka log dir inside.
    """
    if not roots:
        raise InputError("no log dirs given: pass --log-dirs DIR [DIR ...]")
    notes: list[str] = []
    by_dir = _files_by_log_dir(spark, roots, notes)
    log_dirs = _log_dirs(spark, by_dir, notes)
    replicas = _replicas(log_dirs, notes)
    ids = [ld.broker_id for ld in log_dirs if ld.broker_id_known]
    dup = {b for b in ids if ids.count(b) > 1}
    if dup:
        notes.append(f"broker ids {sorted(dup)} appear in more than one log dir (JBOD or duplicate copies)")
    return Inventory(log_dirs, sorted(replicas, key=lambda r: (r.topic, r.partition, r.broker_id)), notes)


def _files_by_log_dir(spark: SparkSession, roots: list[str], notes: list[str]) -> dict[str, list[FileInfo]]:
    """Map each log dir URI to its Kafka files (root and partition files), each listed once over all ``roots``.

    Overlapping roots are noted in ``notes``.

    Raises
    ------
    InputError
        For a root with no Kafka log dir inside.
    """
    by_dir: dict[str, list[FileInfo]] = defaultdict(list)
    seen: set[str] = set()
    for root in roots:
        listed = list_files(spark, to_uri(root))
        files = [f for f in listed if f.uri not in seen]
        seen.update(f.uri for f in files)
        if len(files) < len(listed):
            notes.append(f"{root}: overlaps another --log-dirs root; its files are read once")
        found = set()
        # a folder holding meta.properties or root checkpoints is a log dir, never a partition dir
        # (``broker-1/`` looks like partition 1 of a topic named "broker")
        roots_here = {
            _parent(f.uri) for f in files if _name(f.uri) == "meta.properties" or _name(f.uri) in ROOT_CHECKPOINTS
        }
        for f in files:
            parent = _parent(f.uri)
            name = _name(f.uri)
            if parent in roots_here and (name == "meta.properties" or name in ROOT_CHECKPOINTS):
                found.add(parent)
                by_dir[parent].append(f)
            elif (
                parent not in roots_here
                and parse_partition_dir(_name(parent))
                and (name in PARTITION_FILES or name.endswith(PARTITION_SUFFIXES) or SNAPSHOT_FILE.match(name))
            ):
                by_dir[_parent(parent)].append(f)
                found.add(_parent(parent))
        if not found and len(files) == len(listed):
            raise InputError(
                f"no Kafka log dir found under {root!r}: expected meta.properties or <topic>-<partition>/ "
                "folders with .log segments (a broker's log.dirs directory)"
            )
    return by_dir


def _log_dirs(spark: SparkSession, by_dir: dict[str, list[FileInfo]], notes: list[str]) -> list[LogDir]:
    """Return one :class:`LogDir` per log dir URI, in URI order, its broker id read from its ``meta.properties``.

    The broker id is a synthetic negative id, noted in ``notes``, when ``meta.properties`` names none.
    """
    log_dirs: list[LogDir] = []
    synthetic = -1
    for uri in sorted(by_dir):
        files = by_dir[uri]
        props = {}
        meta = [f for f in files if f.uri == uri + "/meta.properties"]
        if meta:
            props = parse_meta_properties(read_small(spark, meta[0].uri).decode("utf-8", "replace"))
        found_id = broker_id_of(props)
        known = found_id is not None
        bid = found_id if found_id is not None else synthetic
        if not known:
            synthetic -= 1
            notes.append(f"{uri}: no node.id/broker.id in meta.properties; using broker id {bid}")
        ld = LogDir(uri, bid, known, files)
        for f in files:
            if _parent(f.uri) == uri and _name(f.uri) in ROOT_CHECKPOINTS:
                ld.root_checkpoints[_name(f.uri)] = f.uri
        log_dirs.append(ld)
    return log_dirs


def _replicas(log_dirs: list[LogDir], notes: list[str]) -> list[Replica]:
    """Return the partition replicas of ``log_dirs`` with their files (segments and snapshots sorted).

    A partition a broker holds twice (JBOD) keeps its first directory, noted in ``notes``.
    """
    replicas: dict[tuple[int, str, int], Replica] = {}
    for ld in log_dirs:
        for f in ld.files:
            pdir = _parent(f.uri)
            if pdir == ld.uri:
                continue
            tp = parse_partition_dir(_name(pdir))
            if tp is None:
                continue
            key = (ld.broker_id, tp[0], tp[1])
            rep = replicas.get(key)
            if rep is None:
                rep = replicas[key] = Replica(ld.broker_id, ld.uri, tp[0], tp[1], pdir)
            elif rep.dir_uri != pdir:
                notes.append(
                    f"broker {ld.broker_id} has {tp[0]}-{tp[1]} twice ({rep.dir_uri}, {pdir}); using the first"
                )
                continue
            _add_partition_file(rep, f)
    for rep in replicas.values():
        rep.segments.sort()
        rep.snapshots.sort()
    return list(replicas.values())


def _add_partition_file(rep: Replica, f: FileInfo) -> None:
    """Record one file of a partition directory on its replica.

    The file is a segment, the leader-epoch cache, the ``partition.metadata``, or a KRaft snapshot (other files
    are left out).
    """
    name = _name(f.uri)
    m = SEGMENT_FILE.match(name)
    if m:
        rep.segments.append((int(m.group("base")), f.uri, f.size))
    elif name == EPOCH_CHECKPOINT:
        rep.epoch_checkpoint, rep.epoch_checkpoint_mtime = f.uri, f.mtime_ms
    elif name == PARTITION_METADATA:
        rep.partition_metadata = f.uri
    else:
        s = SNAPSHOT_FILE.match(name)
        if s:
            rep.snapshots.append((int(s.group("end")), f.uri))


def log_bytes(inv: Inventory) -> int:
    """Sum the bytes of the ``__consumer_offsets`` and ``__cluster_metadata`` segments of an inventory.

    These are what an audit decodes (the other partitions give only their small files).
    """
    return sum(size for r in inv.replicas if r.topic in (OFFSETS_TOPIC, METADATA_TOPIC) for _b, _u, size in r.segments)
