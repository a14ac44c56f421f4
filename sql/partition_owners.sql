-- Partition owners (issue 12): per group-partition, the member that holds it, from the group records of
-- __consumer_offsets.  Input views group_records (see group_state.sql) and topic_names (topic_id string,
-- topic string: the KRaft metadata log's TopicRecords; empty without one).
-- Classic groups: the member holding the partition in the group's newest generation with members, from the
-- members' Assignment bytes (ConsumerProtocolAssignment.json); the decoder fills group_owners only on that
-- record.  KIP-848 consumer groups: per member its newest ConsumerGroupCurrentMemberAssignment (type 8) that
-- is not a tombstone, the partition going to the member whose record is newest; client.id, host and
-- group.instance.id from the member's newest ConsumerGroupMemberMetadata (type 5).  Share groups (KIP-932) the
-- same way with ShareGroupCurrentMemberAssignment (14) and ShareGroupMemberMetadata (10; no group.instance.id).
-- Streams groups (KIP-1071): per member its newest StreamsGroupCurrentMemberAssignment (22) names its active tasks
-- (subtopology, task partition); the group's newest StreamsGroupTopology (23) gives each subtopology's source and
-- repartition source topics, and task p reads partition p of each (InternalTopicManager); client.id, host,
-- group.instance.id and the Streams process id from the member's newest StreamsGroupMemberMetadata (19).  Assignments name topic
-- ids: without the metadata log (live mode, or no controller dir) they cannot be named and give no owner.
-- Either way records up to the group's latest tombstone (type 2 or 3) do not count, and a member that left
-- (its records tombstoned since) is still named: when the group is Empty, that is the consumer that read the
-- partition last, which is whom to call.  A classic group converted to KIP-848 (or back): the newer wins.
-- Columns: group_id string, topic string, partition int, owner_member_id string, owner_group_instance_id
-- string (static membership, KIP-345), owner_client_id string, owner_client_host string, owner_process_id string
-- (streams groups: the Kafka Streams instance running the member), owner_generation int (classic generation;
-- KIP-848, share and streams groups: the member epoch), owner_assigned_at timestamp (the record's timestamp).
WITH deleted AS (
  SELECT group_id, max(struct(source_partition, offset)) AS deleted_at
  FROM group_records WHERE is_tombstone AND record_type IN (2, 3, 11, 17) GROUP BY group_id
),
live AS (
  SELECT g.* FROM group_records g LEFT JOIN deleted d ON g.group_id = d.group_id
  WHERE NOT g.is_tombstone AND (d.deleted_at IS NULL OR struct(g.source_partition, g.offset) > d.deleted_at)
),
classic AS (
  SELECT *, row_number() OVER (PARTITION BY group_id ORDER BY source_partition DESC, offset DESC) AS rn
  FROM live WHERE record_type = 2 AND group_members > 0 AND group_protocol_type = 'consumer'
),
classic_parts AS (
  SELECT group_id, source_partition, offset, timestamp, group_generation, o.topic AS topic,
         explode(o.partitions) AS partition, o.member_id AS member_id, o.group_instance_id AS group_instance_id,
         o.client_id AS client_id, o.client_host AS client_host, CAST(NULL AS STRING) AS process_id
  FROM (SELECT *, explode(group_owners) AS o FROM classic WHERE rn = 1)
),
cg_assign AS (
  SELECT *, row_number() OVER (PARTITION BY group_id, member_id ORDER BY source_partition DESC, offset DESC) AS rn
  FROM live WHERE record_type IN (8, 14) AND member_id IS NOT NULL AND group_owners IS NOT NULL
),
cg_info AS (
  SELECT group_id, member_id, group_owners[0] AS info,
         row_number() OVER (PARTITION BY group_id, member_id ORDER BY source_partition DESC, offset DESC) AS rn
  FROM live WHERE record_type IN (5, 10) AND member_id IS NOT NULL AND size(group_owners) > 0
),
cg_entries AS (
  SELECT group_id, member_id, source_partition, offset, timestamp, group_generation,
         o.topic AS topic_id, explode(o.partitions) AS partition
  FROM (SELECT *, explode(group_owners) AS o FROM cg_assign WHERE rn = 1)
),
cg_parts AS (
  SELECT a.group_id, a.source_partition, a.offset, a.timestamp, a.group_generation, t.topic, a.partition,
         a.member_id, i.info.group_instance_id, i.info.client_id, i.info.client_host, CAST(NULL AS STRING) AS process_id
  FROM cg_entries a
  JOIN topic_names t ON t.topic_id = a.topic_id
  LEFT JOIN (SELECT * FROM cg_info WHERE rn = 1) i ON i.group_id = a.group_id AND i.member_id = a.member_id
),
st_topology AS (
  SELECT group_id, o.subtopology AS subtopology, o.topic AS topic
  FROM (
    SELECT group_id, explode(group_owners) AS o
    FROM (SELECT *, row_number() OVER (PARTITION BY group_id ORDER BY source_partition DESC, offset DESC) AS rn
          FROM live WHERE record_type = 23 AND group_owners IS NOT NULL)
    WHERE rn = 1
  )
),
st_assign AS (
  SELECT *, row_number() OVER (PARTITION BY group_id, member_id ORDER BY source_partition DESC, offset DESC) AS rn
  FROM live WHERE record_type = 22 AND member_id IS NOT NULL AND group_owners IS NOT NULL
),
st_info AS (
  SELECT group_id, member_id, group_owners[0] AS info,
         row_number() OVER (PARTITION BY group_id, member_id ORDER BY source_partition DESC, offset DESC) AS rn
  FROM live WHERE record_type = 19 AND member_id IS NOT NULL AND size(group_owners) > 0
),
st_entries AS (
  SELECT group_id, member_id, source_partition, offset, timestamp, group_generation,
         o.subtopology AS subtopology, explode(o.partitions) AS partition
  FROM (SELECT *, explode(group_owners) AS o FROM st_assign WHERE rn = 1)
),
st_parts AS (
  SELECT a.group_id, a.source_partition, a.offset, a.timestamp, a.group_generation, t.topic, a.partition,
         a.member_id, i.info.group_instance_id, i.info.client_id, i.info.client_host, i.info.process_id
  FROM st_entries a
  JOIN st_topology t ON t.group_id = a.group_id AND t.subtopology = a.subtopology
  LEFT JOIN (SELECT * FROM st_info WHERE rn = 1) i ON i.group_id = a.group_id AND i.member_id = a.member_id
),
ranked AS (
  -- an assignor that gave one partition to two members (a broken custom assignor): the first member id wins
  SELECT *, row_number() OVER (PARTITION BY group_id, topic, partition
                               ORDER BY source_partition DESC, offset DESC, member_id) AS n
  FROM (SELECT * FROM classic_parts UNION ALL SELECT * FROM cg_parts UNION ALL SELECT * FROM st_parts)
)
SELECT group_id, topic, partition, member_id AS owner_member_id, group_instance_id AS owner_group_instance_id,
       client_id AS owner_client_id, client_host AS owner_client_host, process_id AS owner_process_id,
       group_generation AS owner_generation,
       timestamp_millis(timestamp) AS owner_assigned_at
FROM ranked
WHERE n = 1 AND topic IS NOT NULL
