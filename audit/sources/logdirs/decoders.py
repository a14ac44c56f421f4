"""Decode whole segments with ``mapInArrow`` decoders, run on executors, one segment file per row.

The decoders cover ``__consumer_offsets`` (:mod:`audit.formats.segments`; ``--mode latest`` summarises each
segment per group-partition there, :mod:`audit.formats.latest`), ``__share_group_state``,
``__remote_log_metadata`` and the KRaft metadata log (``__cluster_metadata``), one segment file per row; and
the read-issue rows of their output.
"""

from __future__ import annotations

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from .files import UNREADABLE, UNREADABLE_DETAIL, file_contents


def decode_offsets_files(batches, reduce_latest: bool = False):
    """Decode (path, content) rows into RAW_SCHEMA rows of every record of each segment (mapInArrow).

    With ``reduce_latest``: the latest-mode summary of each segment, see :mod:`audit.formats.latest`.
    """
    from audit.formats.checkpoints import parse_partition_dir
    from audit.formats.record_batch import ReadIssue
    from audit.formats.segments import issues_batch, decode_offsets_segment

    for rb in batches:
        for path, data in file_contents(rb):
            tp = parse_partition_dir(path.rsplit("/", 2)[-2])
            if data is None:
                yield issues_batch(path, tp[1] if tp else -1, [ReadIssue(UNREADABLE, 0, UNREADABLE_DETAIL)])
                continue
            for out in decode_offsets_segment(data, path, tp[1] if tp else -1, reduce_latest=reduce_latest):
                yield out


def decode_offsets_latest(batches):
    """mapInArrow: :func:`decode_offsets_files` with the latest-mode summary."""
    return decode_offsets_files(batches, reduce_latest=True)


def decode_share_state_files(batches):
    """mapInArrow: (path, content) -> SHARE_RAW_SCHEMA rows of every record of each ``__share_group_state`` segment."""
    from audit.formats.checkpoints import parse_partition_dir
    from audit.formats.record_batch import ReadIssue, issue_batch
    from audit.formats.share_state import SHARE_RAW_SCHEMA, decode_share_state_segment

    for rb in batches:
        for path, data in file_contents(rb):
            tp = parse_partition_dir(path.rsplit("/", 2)[-2])
            part = tp[1] if tp else -1
            if data is None:
                yield issue_batch(SHARE_RAW_SCHEMA, path, part, [ReadIssue(UNREADABLE, 0, UNREADABLE_DETAIL)])
                continue
            yield from decode_share_state_segment(data, path, part)


def metadata_schema() -> pa.Schema:
    from audit.formats.metadata_log import METADATA_ROW_FIELDS

    # issue_reason/issue_position: set on rows that stand for a batch or file that could not be read
    return pa.schema(
        [
            ("source_file", pa.string()),
            ("offset", pa.int64()),
            ("timestamp", pa.int64()),
            ("decode_error", pa.string()),
            ("issue_reason", pa.string()),
            ("issue_position", pa.int64()),
        ]
        + list(METADATA_ROW_FIELDS)
    )


def decode_metadata_files(batches):
    """mapInArrow: (path, content) -> one row per KRaft metadata record (control batches skipped)."""
    from audit.formats.metadata_log import MetadataDecodeError, decode_metadata_value
    from audit.formats.record_batch import ATTR_CONTROL, ReadIssue, extract_records, scan_batches

    schema = metadata_schema()
    names = schema.names
    for rb in batches:
        for path, data in file_contents(rb):
            scan = scan_batches(data if data is not None else b"")
            if data is None:
                scan.issues.append(ReadIssue(UNREADABLE, 0, UNREADABLE_DETAIL))
            recs = extract_records(data if data is not None else b"", scan)
            rows = {n: [] for n in names}
            ctl = (scan.attributes[recs.batch] & ATTR_CONTROL) != 0
            for j in range(len(recs)):
                if ctl[j] or recs.value_len[j] < 0:
                    continue
                s, ln = int(recs.value_start[j]), int(recs.value_len[j])
                try:
                    row = decode_metadata_value(recs.data[s : s + ln].tobytes())
                    err = None
                except MetadataDecodeError as exc:
                    row, err = {}, str(exc)[:200]
                row.update(
                    source_file=path, offset=int(recs.offset[j]), timestamp=int(recs.timestamp[j]), decode_error=err
                )
                for n in names:
                    rows[n].append(row.get(n))
            for iss in scan.issues + recs.issues:
                for n in names:
                    rows[n].append(None)
                rows["source_file"][-1] = path
                rows["offset"][-1] = iss.base_offset
                rows["issue_reason"][-1], rows["issue_position"][-1] = iss.reason, iss.position
                rows["decode_error"][-1] = f"{iss.reason} at byte {iss.position}" + (
                    f": {iss.detail}" if iss.detail else ""
                )
            yield pa.RecordBatch.from_pydict(rows, schema=schema)


def decode_remote_metadata_files(batches):
    """Decode (path, content) rows into REMOTE_RAW_SCHEMA rows of every record of each segment (mapInArrow).

    The segments are those of ``__remote_log_metadata``.
    """
    from audit.formats.checkpoints import parse_partition_dir
    from audit.formats.record_batch import ReadIssue, issue_batch
    from audit.formats.remote_log_metadata import REMOTE_RAW_SCHEMA, decode_remote_log_metadata_segment

    for rb in batches:
        for path, data in file_contents(rb):
            tp = parse_partition_dir(path.rsplit("/", 2)[-2])
            part = tp[1] if tp else -1
            if data is None:
                yield issue_batch(REMOTE_RAW_SCHEMA, path, part, [ReadIssue(UNREADABLE, 0, UNREADABLE_DETAIL)])
                continue
            yield from decode_remote_log_metadata_segment(data, path, part)


def decoder_issues(raw: DataFrame, topic: str) -> DataFrame:
    """Return the read-issue rows (file, position, reason, detail, records_affected) of a decoder's output.

    The output has ``source_file, position, offset, decode_error, detail, records_affected`` columns (the
    share-state and remote-log-metadata raw schemas); the rows are its skipped batches and undecodable records of
    ``topic``.
    """
    return raw.where(F.col("decode_error").isNotNull()).select(
        F.col("source_file").alias("file"),
        "position",
        F.col("decode_error").alias("reason"),
        F.coalesce(
            F.col("detail"),
            F.concat(F.lit(f"{topic} record at offset "), F.col("offset").cast("string")),
        ).alias("detail"),
        F.col("records_affected"),
    )
