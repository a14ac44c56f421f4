"""The plan of a ``kafka_offsets_topic`` read: the offsets-topic ranges and the Spark tasks that read them.

:class:`OffsetsTopicPartition` is one ``__consumer_offsets`` partition's ``[start_offset, end_offset)`` range,
captured at planning time; :func:`spread` spreads the non-empty ranges over at most ``tasks``
:class:`OffsetsTopicTask` input partitions, balanced by record count.  :class:`KafkaOffsetsTopicError` is the
data source's error, its message redacted.
"""

from __future__ import annotations

from pyspark.sql.datasource import InputPartition

from .redaction import redact


__all__ = [
    "KafkaOffsetsTopicError",
    "OffsetsTopicPartition",
    "OffsetsTopicTask",
    "spread",
]


class KafkaOffsetsTopicError(RuntimeError):
    """Reading the offsets topic failed.

    The message names the stage, the topic partition and the bootstrap servers and shows the client configuration
    redacted; it never contains a secret.
    """

    def __init__(self, message: str):
        super().__init__(redact(message))


class OffsetsTopicPartition(InputPartition):
    """One offsets-topic partition and its ``[start_offset, end_offset)`` range captured at planning time.

    It is also a Spark input partition of its own.
    """

    def __init__(self, partition: int, start_offset: int, end_offset: int):
        super().__init__((partition, start_offset, end_offset))
        self.partition = int(partition)
        self.start_offset = int(start_offset)
        self.end_offset = int(end_offset)

    def __repr__(self) -> str:
        return f"OffsetsTopicPartition({self.partition}, {self.start_offset}, {self.end_offset})"


class OffsetsTopicTask(InputPartition):
    """One Spark input partition: the :class:`OffsetsTopicPartition` ranges one task reads with one consumer."""

    def __init__(self, ranges: list[OffsetsTopicPartition]):
        super().__init__(tuple((r.partition, r.start_offset, r.end_offset) for r in ranges))
        self.ranges = list(ranges)

    def __repr__(self) -> str:
        return f"OffsetsTopicTask({self.ranges!r})"


def spread(ranges: list[OffsetsTopicPartition], tasks: int | None) -> list[OffsetsTopicTask]:
    """Spread the non-empty ``ranges`` over at most ``tasks`` tasks (None: one each).

    Largest first onto the task with the fewest records so far; each task's ranges in partition order.  No
    non-empty range: one empty task (a Python data source needs at least one input partition).
    """
    import heapq

    todo = sorted(
        (r for r in ranges if r.end_offset > r.start_offset), key=lambda r: (r.start_offset - r.end_offset, r.partition)
    )
    if not todo:
        return [OffsetsTopicTask([])]
    n = len(todo) if tasks is None else max(1, min(int(tasks), len(todo)))
    heap = [(0, i) for i in range(n)]
    groups: list[list[OffsetsTopicPartition]] = [[] for _ in range(n)]
    for r in todo:
        load, i = heapq.heappop(heap)
        groups[i].append(r)
        heapq.heappush(heap, (load + r.end_offset - r.start_offset, i))
    return [OffsetsTopicTask(sorted(g, key=lambda r: r.partition)) for g in groups]
