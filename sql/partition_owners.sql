-- Partition owners (issue 12): per group-partition, the member that holds it in the group's newest generation
-- with members, from the members' Assignment bytes (ConsumerProtocolAssignment.json) in its GroupMetadataValue.
-- Input view group_records (see group_state.sql); group_owners: one entry per (member, topic) with the
-- partitions list, filled by the decoder on each group's newest record with members (others are null).
-- Records up to the group's latest tombstone do not count: a deleted and re-created group does not inherit the
-- old members.  When the group is Empty now (its consumers stopped), the owner is the member that consumed the
-- partition last, which is whom to call; a partition that generation did not assign has no owner.
-- Columns: group_id string, topic string, partition int, owner_member_id string, owner_group_instance_id
-- string (static membership, KIP-345), owner_client_id string, owner_client_host string, owner_generation
-- int, owner_assigned_at timestamp (the record's timestamp).
WITH deleted AS (
  SELECT group_id, max(struct(source_partition, offset)) AS deleted_at
  FROM group_records WHERE is_tombstone GROUP BY group_id
),
with_members AS (
  SELECT g.*, row_number() OVER (PARTITION BY g.group_id ORDER BY g.source_partition DESC, g.offset DESC) AS rn
  FROM group_records g LEFT JOIN deleted d ON g.group_id = d.group_id
  WHERE NOT g.is_tombstone AND g.group_members > 0 AND g.group_protocol_type = 'consumer'
    AND (d.deleted_at IS NULL OR struct(g.source_partition, g.offset) > d.deleted_at)
),
entries AS (
  SELECT group_id, group_generation, timestamp, explode(group_owners) AS o FROM with_members WHERE rn = 1
),
assigned AS (
  SELECT group_id, group_generation, timestamp, o, explode(o.partitions) AS partition FROM entries
),
ranked AS (
  -- an assignor that gave one partition to two members (a broken custom assignor): the first member id wins
  SELECT *, row_number() OVER (PARTITION BY group_id, o.topic, partition ORDER BY o.member_id) AS n FROM assigned
)
SELECT group_id, o.topic AS topic, partition, o.member_id AS owner_member_id,
       o.group_instance_id AS owner_group_instance_id, o.client_id AS owner_client_id,
       o.client_host AS owner_client_host, group_generation AS owner_generation,
       timestamp_millis(timestamp) AS owner_assigned_at
FROM ranked
WHERE n = 1
