"""The harness registry: :data:`HARNESSES` (every harness by name, in the order ``python -m bench.fuzz``
runs them), the seeds of a harness and its saved inputs.
"""

from __future__ import annotations

from pathlib import Path

from bench.fuzz_harnesses.checkpoints import LEADER_EPOCH_CHECKPOINT, META_PROPERTIES, OFFSET_CHECKPOINT
from bench.fuzz_harnesses.codec_blocks import CODEC_HARNESSES
from bench.fuzz_harnesses.common import Harness
from bench.fuzz_harnesses.group_metadata import GROUP_METADATA_VALUE
from bench.fuzz_harnesses.group_records import GROUP_RECORD_VALUE
from bench.fuzz_harnesses.metadata_log import METADATA_SEGMENT, METADATA_VALUE
from bench.fuzz_harnesses.offsets import OFFSETS_RECORDS, OFFSETS_SEGMENT, OFFSETS_SEGMENT_LATEST
from bench.fuzz_harnesses.record_batches import RECORD_BATCHES_LEGACY, RECORD_BATCHES_V2
from bench.fuzz_harnesses.remote_log_metadata import REMOTE_LOG_METADATA_SEGMENT, REMOTE_LOG_METADATA_VALUE
from bench.fuzz_harnesses.seeds import dedup
from bench.fuzz_harnesses.share_state import SHARE_STATE_RECORDS, SHARE_STATE_SEGMENT, SHARE_STATE_VALUE
from bench.fuzz_harnesses.tail_scan import INDEX_FILE, TAIL_SCAN, TAIL_SCAN_INDEX


HARNESSES: dict[str, Harness] = {
    h.name: h
    for h in [
        RECORD_BATCHES_V2,
        RECORD_BATCHES_LEGACY,
        TAIL_SCAN,
        TAIL_SCAN_INDEX,
        INDEX_FILE,
        OFFSETS_SEGMENT,
        OFFSETS_SEGMENT_LATEST,
        *CODEC_HARNESSES,
        OFFSETS_RECORDS,
        GROUP_METADATA_VALUE,
        METADATA_VALUE,
        METADATA_SEGMENT,
        LEADER_EPOCH_CHECKPOINT,
        OFFSET_CHECKPOINT,
        META_PROPERTIES,
        SHARE_STATE_SEGMENT,
        SHARE_STATE_RECORDS,
        SHARE_STATE_VALUE,
        GROUP_RECORD_VALUE,
        REMOTE_LOG_METADATA_VALUE,
        REMOTE_LOG_METADATA_SEGMENT,
    ]
}


def build_seeds(name: str) -> list[tuple[str, bytes]]:
    """Seeds of harness ``name`` built from the real Kafka bytes under :data:`SHARED_DATA` (and the
    repository's recorded lab data): ``[(seed name, bytes)]``, de-duplicated."""
    return dedup(HARNESSES[name].seeds())


def saved_inputs(root: Path, name: str) -> list[Path]:
    """Files under ``root/<name>/`` (committed seeds or regression inputs of one harness)."""
    d = root / name
    return sorted(p for p in d.iterdir() if p.is_file() and not p.name.startswith(".")) if d.is_dir() else []
