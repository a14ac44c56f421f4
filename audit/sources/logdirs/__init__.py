"""Broker log dirs -> the tables the judge reads (commits, epochs, bounds) plus read statistics.

Work split:

* the driver lists files (names, sizes, times only) and reads one ``meta.properties`` per log dir;
* executors read segment bytes (Python workers open local files themselves; other URIs go
  through ``binaryFile``) and decode them with ``mapInArrow`` (:mod:`audit.formats.segments`,
  vectorised numpy), one segment file per row; ``--mode latest`` summarises each segment
  per group-partition there (:mod:`audit.formats.latest`);
* the small files of each replica (last segment, leader-epoch cache, root checkpoints) are read
  and parsed in one ``mapInArrow`` pass;
* replica selection, the leader-epoch replay of the KRaft metadata log and every join
  run in Spark SQL.  The driver collects only per-partition rows of ``__consumer_offsets``
  and ``__cluster_metadata`` (bounded by partition counts, never by record counts).

Modules:

* :mod:`.inventory`: discovery (log dirs, replicas, their files) on the driver;
* :mod:`.files`: the path rows the ``mapInArrow`` readers take and the file bytes they read;
* :mod:`.small_files`: the small files of each replica (tails, leader-epoch caches, ``partition.metadata``,
  root checkpoints) and the per-replica tables they give;
* :mod:`.decoders`: the segment decoders (``__consumer_offsets``, ``__share_group_state``,
  ``__remote_log_metadata``, ``__cluster_metadata``);
* :mod:`.kraft_metadata`: the KRaft metadata log's replay and the remote tier;
* :mod:`.replicas`: replica choice (damage, topic incarnations, authority, bounds, chosen segments);
* :mod:`.recovery`: records recovered from another replica (:func:`recover_from_replicas`);
* :mod:`.reader`: the entry, :func:`read_log_dirs`.

Follows Kafka's on-disk layout (``UnifiedLog``, ``LogSegment``, ``LeaderEpochFileCache``,
``OffsetCheckpointFile``) and, for the metadata log, ``PartitionRegistration.merge``.
"""

from __future__ import annotations

from .decoders import (
    decode_metadata_files,
    decode_offsets_files,
    decode_offsets_latest,
    decode_remote_metadata_files,
    decode_share_state_files,
    decoder_issues,
    metadata_schema,
)
from .files import UNREADABLE, UNREADABLE_DETAIL, balanced_slices, binary_files, file_contents, mmap_local, spark_schema
from .inventory import (
    EPOCH_CHECKPOINT,
    METADATA_TOPIC,
    OFFSETS_TOPIC,
    PARTITION_FILES,
    PARTITION_METADATA,
    PARTITION_SUFFIXES,
    REMOTE_LOG_METADATA_TOPIC,
    SHARE_STATE_TOPIC,
    Inventory,
    LogDir,
    Replica,
    discover,
    log_bytes,
)
from .kraft_metadata import METADATA_PARTITIONS_DDL, REMOTE_TIER_DDL, MetadataState, metadata_state, remote_tier
from .reader import LogDirTables, read_log_dirs
from .recovery import recover_from_replicas
from .replicas import (
    MAX_TOPIC_ID_MISMATCHES,
    REPLICA_SCHEMA,
    ReplicaRow,
    cache_disagreements,
    chosen_segments,
    offsets_segments,
    partition_bounds,
    replica_authority,
    replica_damage,
    replica_rows,
    replicas_table,
    topic_id_mismatch_rows,
    topic_id_mismatches,
)
from .small_files import SMALL_SCHEMA, TAIL, SmallFileTables, log_end_offsets, read_small_file_tables, read_small_files


__all__ = [
    "EPOCH_CHECKPOINT",
    "MAX_TOPIC_ID_MISMATCHES",
    "METADATA_TOPIC",
    "OFFSETS_TOPIC",
    "PARTITION_FILES",
    "PARTITION_METADATA",
    "METADATA_PARTITIONS_DDL",
    "PARTITION_SUFFIXES",
    "REMOTE_LOG_METADATA_TOPIC",
    "REMOTE_TIER_DDL",
    "REPLICA_SCHEMA",
    "SHARE_STATE_TOPIC",
    "SMALL_SCHEMA",
    "TAIL",
    "UNREADABLE",
    "UNREADABLE_DETAIL",
    "Inventory",
    "LogDir",
    "LogDirTables",
    "MetadataState",
    "Replica",
    "ReplicaRow",
    "SmallFileTables",
    "balanced_slices",
    "binary_files",
    "cache_disagreements",
    "chosen_segments",
    "decode_metadata_files",
    "decode_offsets_files",
    "decode_offsets_latest",
    "decode_remote_metadata_files",
    "decode_share_state_files",
    "decoder_issues",
    "discover",
    "file_contents",
    "log_bytes",
    "log_end_offsets",
    "metadata_schema",
    "metadata_state",
    "mmap_local",
    "offsets_segments",
    "partition_bounds",
    "read_log_dirs",
    "read_small_file_tables",
    "read_small_files",
    "recover_from_replicas",
    "remote_tier",
    "replica_authority",
    "replica_damage",
    "replica_rows",
    "replicas_table",
    "spark_schema",
    "topic_id_mismatch_rows",
    "topic_id_mismatches",
]
