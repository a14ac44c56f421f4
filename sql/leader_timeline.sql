-- KRaft __cluster_metadata -> the leader timeline: one row per PartitionRecord / PartitionChangeRecord, with the
-- partition's state after it.  Input view: metadata_records (one replica of __cluster_metadata-0, ordered by seq).
-- Follows PartitionRegistration.merge (org.apache.kafka.metadata): a PartitionRecord sets the whole state; a
-- PartitionChangeRecord bumps the partition epoch by one, and changes only the fields it carries: leader (not -2
-- NO_LEADER_CHANGE; then the leader epoch is bumped by one), isr, eligible_leader_replicas (KIP-966, 4.x),
-- leader_recovery_state (not -1; 1 = RECOVERING marks an unclean election, KIP-704).  Field tags per
-- PartitionRecord.json / PartitionChangeRecord.json.  Records replayed from a snapshot have changed_at null.
-- Columns: topic string (null when the topic id was never named), topic_id string, partition int,
-- metadata_offset bigint, changed_at timestamp, record_type string, leader int, leader_epoch int,
-- partition_epoch int, isr array<int>, eligible_leader_replicas array<int>, leader_recovery_state tinyint,
-- unclean_election boolean (this record began an epoch by an unclean election), topic_removed_at timestamp.
WITH topics AS (
  SELECT topic_id, max_by(topic_name, seq) AS topic
  FROM metadata_records WHERE record_type = 'TopicRecord' AND decode_error IS NULL
  GROUP BY topic_id
),
removed AS (
  SELECT topic_id, timestamp_millis(min(timestamp)) AS topic_removed_at
  FROM metadata_records WHERE record_type = 'RemoveTopicRecord' AND decode_error IS NULL GROUP BY topic_id
),
changes AS (
  SELECT topic_id, partition, seq, offset, timestamp, is_snapshot, record_type,
         CASE WHEN record_type = 'PartitionRecord' THEN leader
              WHEN leader IS NULL OR leader = -2 THEN NULL ELSE leader END AS leader_set,
         CASE WHEN record_type = 'PartitionRecord' THEN leader_epoch END AS epoch_set,
         CASE WHEN record_type = 'PartitionRecord' THEN partition_epoch END AS partition_epoch_set,
         isr, eligible_leader_replicas,
         CASE WHEN leader_recovery_state >= 0 THEN leader_recovery_state END AS recovery_set,
         sum(CASE WHEN record_type = 'PartitionRecord' THEN 1 ELSE 0 END)
           OVER (PARTITION BY topic_id, partition ORDER BY seq) AS grp
  FROM metadata_records
  WHERE record_type IN ('PartitionRecord', 'PartitionChangeRecord') AND decode_error IS NULL
),
replayed AS (
  SELECT *,
         first(epoch_set, true) OVER g + count(leader_set) OVER g - 1 AS leader_epoch_now,
         first(partition_epoch_set, true) OVER g + count(*) OVER g - 1 AS partition_epoch_now,
         last(leader_set, true) OVER g AS leader_now,
         last(isr, true) OVER g AS isr_now,
         last(eligible_leader_replicas, true) OVER g AS elr_now,
         last(recovery_set, true) OVER g AS recovery_now
  FROM changes
  WHERE grp > 0
  WINDOW g AS (PARTITION BY topic_id, partition, grp ORDER BY seq ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)
)
SELECT t.topic, r.topic_id, r.partition, CASE WHEN r.is_snapshot THEN NULL ELSE r.offset END AS metadata_offset,
       CASE WHEN r.is_snapshot THEN NULL ELSE timestamp_millis(r.timestamp) END AS changed_at,
       r.record_type, CAST(r.leader_now AS INT) AS leader, CAST(r.leader_epoch_now AS INT) AS leader_epoch,
       CAST(r.partition_epoch_now AS INT) AS partition_epoch, r.isr_now AS isr,
       r.elr_now AS eligible_leader_replicas, CAST(r.recovery_now AS TINYINT) AS leader_recovery_state,
       coalesce(r.record_type = 'PartitionChangeRecord' AND r.recovery_set = 1 AND r.leader_set IS NOT NULL, false)
         AS unclean_election,
       x.topic_removed_at
FROM replayed r
LEFT JOIN topics t ON r.topic_id = t.topic_id
LEFT JOIN removed x ON r.topic_id = x.topic_id
