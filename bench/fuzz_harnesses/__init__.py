"""Fuzz harnesses for every byte-level decoder of kafka-offset-audit.

Each harness is a function ``harness(data: bytes) -> None`` that feeds ``data`` to the project's real
decoder the way the audit feeds it, and checks the decoder's documented contract.  A harness raises
only when the decoder breaks that contract: an exception other than the one the entry point documents
(``CheckpointError`` for the checkpoint parsers, ``MetadataDecodeError`` for a metadata record value,
``ValueError`` for a group-metadata value), or a result the contract rules out
(:class:`HarnessViolation`: an issue row without its file or byte position, a value that does not fit
the Arrow column the audit writes it to, ...).  The decoders that report bad input as issue rows
(segments, tails, ``read_small_files``) document no exception at all.

:data:`HARNESSES` maps each harness name to a :class:`Harness`: the function, how its input is laid
out, the seeds built from real Kafka bytes (:func:`build_seeds`), and a structure-aware mutator
(``mutate(data, max_size, seed, byte_mutate)``; ``byte_mutate`` is libFuzzer's own mutator under
atheris, see :mod:`bench.fuzz`).  The mutators keep corruption *inside* the framing the decoders
check first: after editing a v2 batch they recompute its CRC-32C (and a legacy message's CRC-32),
they decompress a compressed records block, edit the records and compress it again, and they push
length and count fields to extremes (0, -1, 2^31-1, 2^63-1, 5- and 10-byte varints).

Nothing here needs atheris: the regression test (``tests/bench/test_fuzz_regressions.py``) replays saved
inputs through these functions directly.

The package holds one module per harness (or small family of harnesses): :mod:`.record_batches`,
:mod:`.tail_scan`, :mod:`.offsets`, :mod:`.codec_blocks`, :mod:`.group_metadata`, :mod:`.metadata_log`,
:mod:`.checkpoints`, :mod:`.share_state`, :mod:`.group_records` and :mod:`.remote_log_metadata`; what they share
lives in :mod:`.common` (paths, :class:`HarnessViolation`, contract checks, :class:`Harness`), :mod:`.encoding`
(Kafka's byte layouts), :mod:`.mutators` (the structure-aware mutation machinery) and :mod:`.seeds` (seeds from
real Kafka bytes); :mod:`.registry` builds :data:`HARNESSES`.  This module re-exports their public names.
"""

from __future__ import annotations

from bench.fuzz_harnesses.common import (
    INDEX_SEGMENT,
    METADATA_PATH,
    REGRESSION_DIR,
    REPO,
    SEED_DIR,
    SEGMENT_PATH,
    SHARED_DATA,
    Harness,
    HarnessViolation,
)
from bench.fuzz_harnesses.encoding import (
    build_record,
    compress,
    fix_entry,
    join_kv_records,
    join_records,
    legacy_message,
    minimal_record,
    overlong_uvarint,
    parse_record,
    read_uvarint,
    read_zigzag,
    split_chain,
    split_kv_records,
    split_records,
    tagged_fields,
    uvarint,
    v2_batch,
    zigzag,
)
from bench.fuzz_harnesses.mutators import (
    EXTREMES,
    ByteMutate,
    KVMutate,
    extreme,
    extreme_varint,
    mutate_chain,
    mutate_offsets_key,
    mutate_offsets_value,
    offsets_kv_mutator,
    poke,
    segment_mutator,
    value_mutator,
)
from bench.fuzz_harnesses.seeds import dedup, trim
from bench.fuzz_harnesses.record_batches import record_batches
from bench.fuzz_harnesses.tail_scan import (
    index_container_mutator,
    index_file,
    index_mutator,
    index_segment,
    join_index_container,
    mutate_index,
    split_index_container,
    tail_scan,
    tail_scan_index,
)
from bench.fuzz_harnesses.offsets import kv_records_mutator, offsets_records, offsets_segment, offsets_segment_latest
from bench.fuzz_harnesses.codec_blocks import codec_mutator, codec_segment, join_codec_container, split_codec_container
from bench.fuzz_harnesses.group_metadata import group_metadata_value
from bench.fuzz_harnesses.metadata_log import (
    metadata_kv_mutator,
    metadata_segment,
    metadata_value,
    mutate_metadata_value,
)
from bench.fuzz_harnesses.checkpoints import leader_epoch_checkpoint, meta_properties, offset_checkpoint, text_mutator
from bench.fuzz_harnesses.share_state import (
    SHARE_PARTITION,
    SHARE_SEGMENT_PATH,
    SHARE_TOPIC_ID,
    STATE_BATCH_NAMES,
    ShareValue,
    dcc_tag,
    join_share_value,
    mutate_share_key,
    mutate_share_value,
    parse_share_value,
    random_share_value,
    share_batches,
    share_key,
    share_kv_mutator,
    share_records_mutator,
    share_state_records,
    share_state_segment,
    share_state_value,
    split_share_value,
)
from bench.fuzz_harnesses.group_records import (
    GROUP_RECORD_TYPES,
    group_record_key,
    group_record_value,
    join_group_record,
    split_group_record,
)
from bench.fuzz_harnesses.remote_log_metadata import (
    REMOTE_PARTITION,
    REMOTE_SEGMENT_ID,
    REMOTE_SEGMENT_PATH,
    REMOTE_TOPIC_ID,
    RemoteValue,
    mutate_remote_value,
    parse_remote_value,
    random_remote_value,
    remote_kv_mutator,
    remote_log_metadata_segment,
    remote_log_metadata_value,
    remote_reference,
)
from bench.fuzz_harnesses.registry import HARNESSES, build_seeds, saved_inputs

#: The names :mod:`bench.fuzz` uses for trimming and de-duplicating the committed seeds.

__all__ = [
    "dedup",
    "trim",
    "INDEX_SEGMENT",
    "METADATA_PATH",
    "REGRESSION_DIR",
    "REPO",
    "SEED_DIR",
    "SEGMENT_PATH",
    "SHARED_DATA",
    "Harness",
    "HarnessViolation",
    "build_record",
    "compress",
    "fix_entry",
    "join_kv_records",
    "join_records",
    "legacy_message",
    "minimal_record",
    "overlong_uvarint",
    "parse_record",
    "read_uvarint",
    "read_zigzag",
    "split_chain",
    "split_kv_records",
    "split_records",
    "tagged_fields",
    "uvarint",
    "v2_batch",
    "zigzag",
    "EXTREMES",
    "ByteMutate",
    "KVMutate",
    "extreme",
    "extreme_varint",
    "mutate_chain",
    "mutate_offsets_key",
    "mutate_offsets_value",
    "offsets_kv_mutator",
    "poke",
    "segment_mutator",
    "value_mutator",
    "record_batches",
    "index_container_mutator",
    "index_file",
    "index_mutator",
    "index_segment",
    "join_index_container",
    "mutate_index",
    "split_index_container",
    "tail_scan",
    "tail_scan_index",
    "kv_records_mutator",
    "offsets_records",
    "offsets_segment",
    "offsets_segment_latest",
    "codec_mutator",
    "codec_segment",
    "join_codec_container",
    "split_codec_container",
    "group_metadata_value",
    "metadata_kv_mutator",
    "metadata_segment",
    "metadata_value",
    "mutate_metadata_value",
    "leader_epoch_checkpoint",
    "meta_properties",
    "offset_checkpoint",
    "text_mutator",
    "SHARE_PARTITION",
    "SHARE_SEGMENT_PATH",
    "SHARE_TOPIC_ID",
    "STATE_BATCH_NAMES",
    "ShareValue",
    "dcc_tag",
    "join_share_value",
    "mutate_share_key",
    "mutate_share_value",
    "parse_share_value",
    "random_share_value",
    "share_batches",
    "share_key",
    "share_kv_mutator",
    "share_records_mutator",
    "share_state_records",
    "share_state_segment",
    "share_state_value",
    "split_share_value",
    "GROUP_RECORD_TYPES",
    "group_record_key",
    "group_record_value",
    "join_group_record",
    "split_group_record",
    "REMOTE_PARTITION",
    "REMOTE_SEGMENT_ID",
    "REMOTE_SEGMENT_PATH",
    "REMOTE_TOPIC_ID",
    "RemoteValue",
    "mutate_remote_value",
    "parse_remote_value",
    "random_remote_value",
    "remote_kv_mutator",
    "remote_log_metadata_segment",
    "remote_log_metadata_value",
    "remote_reference",
    "HARNESSES",
    "build_seeds",
    "saved_inputs",
]
