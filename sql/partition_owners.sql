-- Partition owners (issue 12): per group-partition, the member the group last assigned it to, from the
-- members' Assignment bytes (ConsumerProtocolAssignment.json) in the group's GroupMetadataValue records.
-- Input view group_records (see group_state.sql).  Only records after the group's latest tombstone count: a
-- deleted and re-created group does not inherit the old members.  The owner is taken from the newest record
-- whose assignment holds the partition; when the group is Empty now (its consumers stopped), that is the
-- member that consumed it last, which is whom to call.  owner_generation tells it from the current one.
-- Columns: group_id string, topic string, partition int, owner_member_id string, owner_group_instance_id
-- string (static membership, KIP-345), owner_client_id string, owner_client_host string, owner_generation
-- int, owner_assigned_at timestamp (the record's timestamp).
WITH deleted AS (
  SELECT group_id, max(struct(source_partition, offset)) AS deleted_at
  FROM group_records WHERE is_tombstone GROUP BY group_id
),
assigned AS (
  SELECT g.group_id, g.source_partition, g.offset, g.timestamp, g.group_generation, explode(g.group_owners) AS o
  FROM group_records g LEFT JOIN deleted d ON g.group_id = d.group_id
  WHERE NOT g.is_tombstone AND size(g.group_owners) > 0
    AND (d.deleted_at IS NULL OR struct(g.source_partition, g.offset) > d.deleted_at)
),
ranked AS (
  SELECT *, row_number() OVER (PARTITION BY group_id, o.topic, o.partition
                               ORDER BY source_partition DESC, offset DESC, o.member_id) AS rn
  FROM assigned
)
SELECT group_id, o.topic AS topic, o.partition AS partition, o.member_id AS owner_member_id,
       o.group_instance_id AS owner_group_instance_id, o.client_id AS owner_client_id,
       o.client_host AS owner_client_host, group_generation AS owner_generation,
       timestamp_millis(timestamp) AS owner_assigned_at
FROM ranked
WHERE rn = 1
