-- Each group's state as of its latest group record in __consumer_offsets (issue 12).
-- Input view group_records: record_type short (2 classic GroupMetadata, 3 ConsumerGroupMetadata, 5
-- ConsumerGroupMemberMetadata, 8 ConsumerGroupCurrentMemberAssignment, 10 ShareGroupMemberMetadata, 11
-- ShareGroupMetadata, 17 StreamsGroupMetadata, 19 StreamsGroupMemberMetadata), group_id string, member_id string
-- (types 5, 8, 10, 19), source_partition int, offset bigint, timestamp bigint (ms), is_tombstone boolean,
-- group_generation int, group_protocol_type string, group_protocol string, group_members int, group_owners
-- array<struct<member_id, group_instance_id, client_id, client_host, topic, partitions array<int>>>.
-- Classic groups: the coordinator writes a GroupMetadataValue when a generation completes (Stable, with the
-- assignment), when the last member leaves (Empty, no members) and a tombstone when the group is deleted or
-- expires (Dead) (GroupMetadataManager.storeGroup / GroupCoordinatorShard); PreparingRebalance and
-- CompletingRebalance are never written, so they cannot be told from the log.
-- KIP-848 consumer groups (group.protocol=consumer): a ConsumerGroupMetadata record on every group epoch, a
-- tombstone when the group is deleted (Dead); Stable while a member's latest ConsumerGroupMemberMetadata is
-- not a tombstone, else Empty.  Share groups (KIP-932: ShareGroupMetadata, ShareGroupMemberMetadata) and streams
-- groups (KIP-1071: StreamsGroupMetadata, StreamsGroupMemberMetadata) the same way with their own record types.
-- A classic group converted to a consumer group (or back) takes the state of whichever protocol wrote last.
-- Columns: group_id string, group_state string (Stable, Empty, Dead), group_protocol_type string,
-- group_protocol string (the classic assignor, e.g. range; null for KIP-848 groups: the assignor runs in the
-- coordinator), group_generation int (classic only), group_state_since timestamp (the record's timestamp),
-- group_type string (Kafka's GroupType: classic, consumer, share, streams), group_members int (the members of the latest
-- classic generation, or the KIP-848 members whose latest member record is not a tombstone; 0 when Dead).
WITH classic AS (
  SELECT group_id, source_partition, offset, timestamp,
         CASE WHEN is_tombstone THEN 'Dead' WHEN group_members = 0 THEN 'Empty' ELSE 'Stable' END AS group_state,
         group_protocol_type, group_protocol,
         CASE WHEN is_tombstone THEN NULL ELSE group_generation END AS group_generation,
         CASE WHEN is_tombstone THEN 0 ELSE group_members END AS group_members,
         row_number() OVER (PARTITION BY group_id ORDER BY source_partition DESC, offset DESC) AS rn
  FROM group_records WHERE record_type = 2
),
typed AS (
  -- the group-level and member-level records of the groups whose coordinator runs the protocol (KIP-848 and after)
  SELECT *, CASE WHEN record_type IN (3, 5) THEN 'consumer' WHEN record_type IN (10, 11) THEN 'share'
                 ELSE 'streams' END AS group_type,
         record_type IN (3, 11, 17) AS is_group_record
  FROM group_records WHERE record_type IN (3, 5, 10, 11, 17, 19)
),
cg_meta AS (
  SELECT group_id, group_type, source_partition, offset, timestamp, is_tombstone,
         row_number() OVER (PARTITION BY group_id ORDER BY source_partition DESC, offset DESC) AS rn
  FROM typed WHERE is_group_record
),
cg_members AS (
  SELECT group_id, group_type, member_id, is_tombstone,
         row_number() OVER (PARTITION BY group_id, group_type, member_id ORDER BY source_partition DESC, offset DESC) AS rn
  FROM typed WHERE NOT is_group_record AND member_id IS NOT NULL
),
live_members AS (
  SELECT group_id, group_type, count(*) AS n FROM cg_members WHERE rn = 1 AND NOT is_tombstone GROUP BY group_id, group_type
),
latest AS (
  SELECT group_id, source_partition, offset, timestamp, group_state, group_protocol_type, group_protocol,
         group_generation, 'classic' AS group_type, group_members
  FROM classic WHERE rn = 1
  UNION ALL
  SELECT m.group_id, m.source_partition, m.offset, m.timestamp,
         CASE WHEN m.is_tombstone THEN 'Dead' WHEN coalesce(l.n, 0) > 0 THEN 'Stable' ELSE 'Empty' END,
         m.group_type, CAST(NULL AS STRING), CAST(NULL AS INT), m.group_type,
         CASE WHEN m.is_tombstone THEN 0 ELSE CAST(coalesce(l.n, 0) AS INT) END
  FROM cg_meta m LEFT JOIN live_members l ON m.group_id = l.group_id AND m.group_type = l.group_type
  WHERE m.rn = 1
)
SELECT group_id, group_state, group_protocol_type, group_protocol, group_generation,
       timestamp_millis(timestamp) AS group_state_since, group_type, group_members
FROM (
  SELECT *, row_number() OVER (PARTITION BY group_id ORDER BY source_partition DESC, offset DESC) AS rn FROM latest
)
WHERE rn = 1
