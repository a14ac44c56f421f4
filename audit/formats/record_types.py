"""The record types of ``__consumer_offsets``: the ``int16`` that starts every key.

They follow Kafka's ``CoordinatorRecordType`` (generated from the ``apiKey`` of each ``*Key.json`` schema in
``group-coordinator/src/main/resources/common/message/``, e.g. ``OffsetCommitKey.json``,
``GroupMetadataKey.json``, ``ConsumerGroupMemberMetadataKey.json``) and ``GroupCoordinatorRecordSerde``,
which picks each record's key and value schema by it: 0 and 1 offset commits, 2 classic group metadata,
3..23 the KIP-848 consumer group, KIP-932 share group and KIP-1071 streams group records.
"""

from __future__ import annotations

import numpy as np


__all__ = [
    "CONSUMER_GROUP_CURRENT_ASSIGNMENT_TYPE",
    "CONSUMER_GROUP_MEMBER_METADATA_TYPE",
    "CONSUMER_GROUP_METADATA_TYPE",
    "GROUP_METADATA_TYPE",
    "OFFSET_COMMIT_TYPES",
    "OTHER_GROUP_TYPES",
    "RECORD_TYPE_NAMES",
    "SHARE_GROUP_CURRENT_ASSIGNMENT_TYPE",
    "SHARE_GROUP_MEMBER_METADATA_TYPE",
    "STREAMS_GROUP_CURRENT_ASSIGNMENT_TYPE",
    "STREAMS_GROUP_MEMBER_METADATA_TYPE",
    "STREAMS_GROUP_TOPOLOGY_TYPE",
]

OFFSET_COMMIT_TYPES = (0, 1)
GROUP_METADATA_TYPE = 2
#: Names of the record types Kafka defines (``CoordinatorRecordType``; the ``apiKey`` of each
#: ``*Key.json``), for counting.  9 (ShareGroupPartitionMetadata, 3.9 and 4.0) and 18
#: (StreamsGroupPartitionMetadata, early 4.x development) are no longer written but may still be in a log.
RECORD_TYPE_NAMES = {
    0: "OffsetCommit(legacy)",
    1: "OffsetCommit",
    2: "GroupMetadata",
    3: "ConsumerGroupMetadata",
    4: "ConsumerGroupPartitionMetadata",
    5: "ConsumerGroupMemberMetadata",
    6: "ConsumerGroupTargetAssignmentMetadata",
    7: "ConsumerGroupTargetAssignmentMember",
    8: "ConsumerGroupCurrentMemberAssignment",
    9: "ShareGroupPartitionMetadata",
    10: "ShareGroupMemberMetadata",
    11: "ShareGroupMetadata",
    12: "ShareGroupTargetAssignmentMetadata",
    13: "ShareGroupTargetAssignmentMember",
    14: "ShareGroupCurrentMemberAssignment",
    15: "ShareGroupStatePartitionMetadata",
    16: "ConsumerGroupRegularExpression",
    17: "StreamsGroupMetadata",
    18: "StreamsGroupPartitionMetadata",
    19: "StreamsGroupMemberMetadata",
    20: "StreamsGroupTargetAssignmentMetadata",
    21: "StreamsGroupTargetAssignmentMember",
    22: "StreamsGroupCurrentMemberAssignment",
    23: "StreamsGroupTopology",
}
#: Known record types that are neither offset commits nor classic group metadata: counted, not decoded.
OTHER_GROUP_TYPES = np.array(
    sorted(set(RECORD_TYPE_NAMES) - {*OFFSET_COMMIT_TYPES, GROUP_METADATA_TYPE}), dtype=np.int64
)

# KIP-848 consumer groups
CONSUMER_GROUP_METADATA_TYPE = 3
CONSUMER_GROUP_MEMBER_METADATA_TYPE = 5
CONSUMER_GROUP_CURRENT_ASSIGNMENT_TYPE = 8

# KIP-932 share groups
SHARE_GROUP_MEMBER_METADATA_TYPE = 10
SHARE_GROUP_CURRENT_ASSIGNMENT_TYPE = 14

# KIP-1071 streams groups
STREAMS_GROUP_MEMBER_METADATA_TYPE = 19
STREAMS_GROUP_CURRENT_ASSIGNMENT_TYPE = 22
STREAMS_GROUP_TOPOLOGY_TYPE = 23
