-- Each classic group's state as of its latest GroupMetadataValue record in __consumer_offsets (issue 12).
-- Input view group_records: group_id string, source_partition int, offset bigint, timestamp bigint (ms),
-- is_tombstone boolean, group_generation int, group_protocol_type string, group_protocol string,
-- group_members int, group_owners array<struct<topic, partition, member_id, group_instance_id, client_id,
-- client_host>>.
-- The coordinator writes a GroupMetadataValue when a generation completes (SyncGroup: Stable, with the
-- assignment), when the last member leaves (Empty, no members) and a tombstone when the group is deleted or
-- expires (Dead) (GroupMetadataManager.storeGroup / GroupCoordinatorShard); the states in between
-- (PreparingRebalance, CompletingRebalance) are never written, so they cannot be told from the log.
-- Columns: group_id string, group_state string (Stable, Empty, Dead), group_protocol_type string,
-- group_protocol string (the assignor, e.g. range), group_generation int, group_state_since timestamp
-- (the record's timestamp).
SELECT group_id,
       CASE WHEN is_tombstone THEN 'Dead' WHEN group_members = 0 THEN 'Empty' ELSE 'Stable' END AS group_state,
       group_protocol_type, group_protocol,
       CASE WHEN is_tombstone THEN NULL ELSE group_generation END AS group_generation,
       timestamp_millis(timestamp) AS group_state_since
FROM (
  SELECT *, row_number() OVER (PARTITION BY group_id ORDER BY source_partition DESC, offset DESC) AS rn
  FROM group_records
)
WHERE rn = 1
