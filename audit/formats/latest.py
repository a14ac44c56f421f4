"""Latest-mode summary of one segment's offset commits, computed with numpy before any row leaves Python.

``--mode latest`` only reads, per group-partition, the newest live commit, its predecessor
and the earlier commit with the highest leader epoch (see :func:`audit.commits.live_commits`).
A segment holding 600,000 commits of 20,000 keys therefore needs to hand at most about
four rows per key to Spark, plus counts.  The summary is *mergeable*: the rows kept are
real records with their real offsets, so Spark's order-based rules over all segments give
the same answer as over every record.

Kept per key (group, topic, partition) of a segment, over its *summarisable* records:

* the last offset-commit tombstone (it deletes earlier segments' commits of the key);
* after it: the last live commit (carrying ``live_count`` = live commits it stands for),
  the one before, and the earlier one with the highest (leader epoch, offset).

A key is summarisable in a segment when none of its records there is transactional (the
outcome depends on markers that may be in a later segment); otherwise every record of the key
passes through unchanged. Group tombstones (``GroupMetadata`` with a null value) delete no
commit (see :func:`audit.commits.live_commits`), so they do not matter here.  Keys are compared byte for byte (after the 2-byte key version,
so record types 0 and 1 of one group-partition are one key, as in
``GroupMetadataManager.readMessageKey``), never by hash alone.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .record_batch import overlapping_view


__all__ = [
    "MAX_KEY_BYTES",
    "LatestSummary",
    "group_equal_bytes",
    "stand_ins",
    "summarise_latest",
]

#: keys longer than this many bytes are not summarised (they pass through)
MAX_KEY_BYTES = 1024
_MASKS = np.array([(1 << (8 * i)) - 1 for i in range(8)] + [(1 << 64) - 1], dtype=np.uint64)


def group_equal_bytes(
    data: np.ndarray, start: np.ndarray, length: np.ndarray, max_bytes: int = MAX_KEY_BYTES
) -> np.ndarray:
    """Id per row such that two rows share an id iff their byte ranges are equal.

    ``data`` uint8 buffer, ``start``/``length`` int64 arrays.  Rows with ``length`` < 0 or
    above ``max_bytes`` (at most 32767) get id -1 (a caller passes them through).  Ids are 0 .. distinct - 1.
    Keys are compared in classes of one length (keys of different lengths are never equal), so memory
    follows the bytes compared, not the row count times the longest key.
    """
    m = len(start)
    ids = np.full(m, -1, dtype=np.int64)
    ok = np.nonzero((length >= 0) & (length <= max_bytes))[0]
    if not len(ok):
        return ids
    lengths = length[ok].astype(np.int16)  # <= max_bytes: a stable sort of int16 is a radix sort, O(rows)
    order = ok[np.argsort(lengths, kind="stable")]
    bounds = np.concatenate([[0], np.cumsum(np.bincount(lengths))])
    first_id = 0
    for n in np.flatnonzero(np.diff(bounds)).tolist():  # the lengths present
        rows = order[bounds[n] : bounds[n + 1]]
        cls = _group_equal_length(data, start[rows].astype(np.int64), n)
        ids[rows] = cls + first_id
        first_id += int(cls.max()) + 1  # dense: arrays indexed by id stay as long as the distinct keys
    return ids


def stand_ins(ids: np.ndarray) -> np.ndarray:
    """For :func:`group_equal_bytes` ids, the index of one row (the last) of each id, indexed by id."""
    has = np.nonzero(ids >= 0)[0]
    rep = np.zeros(int(ids.max()) + 1 if len(has) else 0, dtype=np.int64)
    rep[ids[has]] = has
    return rep


def _group_equal_length(data: np.ndarray, s: np.ndarray, n: int) -> np.ndarray:
    """Apply :func:`group_equal_bytes` to keys of ``n`` bytes starting at ``s``.

    The ids are below the row count, numbered in order of first appearance.

    Each key is read as ``ceil(n / 8)`` little-endian words (bytes past its end masked to 0, bytes past
    the buffer's end read as 0), one fixed-width value per key, and Arrow's ``dictionary_encode``
    numbers the distinct values: a hash table that compares whole values, so equal ids mean equal bytes.
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    m = len(s)
    if n == 0:
        return np.zeros(m, dtype=np.int64)
    width = (n + 7) // 8
    keys = _word_rows(data, width)
    late = s >= len(keys)  # too near the buffer's end for whole words
    out = np.empty((m, width), dtype=np.uint64)
    if not late.any():
        out[:] = keys[s]
    else:
        out[~late] = keys[s[~late]]
        lo = int(s[late].min())
        tail = np.concatenate([data[lo:], np.zeros(int(s[late].max()) - lo + 8 * width, dtype=np.uint8)])
        out[late] = _word_rows(tail, width)[s[late] - lo]
    if n % 8:
        out[:, -1] &= _MASKS[n % 8]
    values = pa.FixedSizeBinaryArray.from_buffers(pa.binary(8 * width), m, [None, pa.py_buffer(out)])
    return pc.dictionary_encode(values).indices.to_numpy().astype(np.int64)


def _word_rows(data: np.ndarray, width: int) -> np.ndarray:
    """View the uint8 array ``data`` as rows of ``width`` little-endian uint64 words, row *i* at byte *i*.

    Row *i* is the ``width`` words at bytes *i*, *i* + 8, ... (one gather of rows reads many keys); rows only where
    all those words fit.
    """
    from numpy.lib.stride_tricks import as_strided

    words = overlapping_view(data, "<u8")
    return as_strided(words, shape=(max(len(words) - 8 * (width - 1), 0), width), strides=(words.strides[0], 8))


@dataclass
class LatestSummary:
    """Which records of a segment to emit, and what each stands for.

    ``keep``: sorted record indices to emit; ``live_count`` (per kept record): live commits
    it stands for in ``--mode latest`` (1 for records passed through, the key's count on a
    summarised latest commit, 0 on other summarised rows); ``record_count`` (per kept
    record): 1 for records passed through, 0 for summarised ones (they are counted in
    ``counts`` instead); ``counts``: (record_type, value_version, is_tombstone, n) of every
    summarised record, for the records-read statistics.
    """

    keep: np.ndarray
    live_count: np.ndarray
    record_count: np.ndarray
    counts: list[tuple[int, int, bool, int]]


def summarise_latest(  # noqa: PLR0915 - one vectorised pass over a segment; to split next
    data: np.ndarray,
    key_start: np.ndarray,
    key_len: np.ndarray,
    num: dict,
    is_transactional: np.ndarray,
    is_control: np.ndarray,
    full_key_ids: np.ndarray | None = None,
) -> LatestSummary:
    """Latest-mode summary of one segment's records (see the module docstring).

    ``num`` is :func:`audit.formats.offsets.decode_offsets_numeric` output for the same
    records, in offset order (or :func:`audit.formats.offsets.decode_offsets_summary`'s, the same columns);
    ``is_transactional``/``is_control`` come from their batches.  ``full_key_ids``:
    :func:`group_equal_bytes` over the records' whole keys with ``max_bytes`` :data:`MAX_KEY_BYTES` + 2, when
    the caller has it: the keys after their version are then compared once per distinct key, not per record.
    """
    n = len(key_start)
    rtype, tomb, decoded = num["record_type"], num["is_tombstone"], num["decoded"]
    commit = ~is_control & decoded & num["topic_ok"]  # record types 0/1 with a whole key

    key_ids = np.full(n, -1, dtype=np.int64)
    rows = np.nonzero(commit)[0]
    if full_key_ids is None:
        key_ids[rows] = group_equal_bytes(data, key_start[rows] + 2, key_len[rows] - 2)
    else:
        # equal whole keys have equal keys after the version: compare one record of each distinct whole key
        f = full_key_ids[rows]
        whole = f >= 0  # -1: longer than MAX_KEY_BYTES after the version, passed through as above
        rep = stand_ins(full_key_ids)
        sid = group_equal_bytes(data, key_start[rep] + 2, key_len[rep] - 2)
        key_ids[rows[whole]] = sid[f[whole]]
    candidate = commit & (key_ids >= 0)
    # keys with a transactional record here: their outcome is decided in Spark, record by record
    held = np.zeros(int(key_ids.max()) + 1 if n else 0, dtype=bool)
    held[key_ids[candidate & is_transactional]] = True
    summarised = candidate.copy()
    summarised[candidate] = ~held[key_ids[candidate]]

    r = np.nonzero(summarised)[0]
    if not len(r):
        keep = np.arange(n, dtype=np.int64)
        ones = np.ones(n, dtype=np.int64)
        return LatestSummary(keep, ones, ones.copy(), [])
    k = key_ids[r]
    nk = int(k.max()) + 1
    t = tomb[r]
    last_tomb = np.full(nk, -1, dtype=np.int64)
    np.maximum.at(last_tomb, k[t], r[t])
    live = ~t & (r > last_tomb[k])
    count = np.bincount(k[live], minlength=nk)
    latest = np.full(nk, -1, dtype=np.int64)
    np.maximum.at(latest, k[live], r[live])
    earlier = live & (r != latest[k])
    pred = np.full(nk, -1, dtype=np.int64)
    np.maximum.at(pred, k[earlier], r[earlier])
    ref = np.full(nk, -1, dtype=np.int64)
    rank = ((num["leader_epoch"][r].astype(np.int64) + 1) << 32) | r  # epoch >= -1; r < 2**32
    np.maximum.at(ref, k[earlier], rank[earlier])
    ref = np.where(ref >= 0, ref & 0xFFFFFFFF, -1)

    chosen = np.concatenate([latest, pred, ref, last_tomb])
    keep = np.union1d(np.nonzero(~summarised)[0], chosen[chosen >= 0])
    live_count = np.where(summarised[keep], 0, 1).astype(np.int64)
    record_count = live_count.copy()
    has_latest = latest >= 0
    live_count[np.searchsorted(keep, latest[has_latest])] = count[has_latest]

    # record_type, value_version (-1..32767) and tombstone packed into one int for counting
    combo = (rtype[r].astype(np.int64) << 20) | ((num["value_version"][r].astype(np.int64) + 1) << 1) | t
    import pandas as pd

    codes, uniq = pd.factorize(combo)  # a hash table: a few distinct values, no sort of every record
    cnt = np.bincount(codes, minlength=len(uniq))
    order = np.argsort(uniq)
    uniq, cnt = uniq[order], cnt[order]
    counts = [(int(c >> 20), int(((c >> 1) & 0x7FFFF) - 1), bool(c & 1), int(m)) for c, m in zip(uniq, cnt)]
    return LatestSummary(keep, live_count, record_count, counts)
