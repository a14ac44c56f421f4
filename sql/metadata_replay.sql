-- KRaft __cluster_metadata replay -> one row per topic-partition.
-- Input view: metadata_records (decoded records of one replica of __cluster_metadata-0, ordered by seq).
-- Follows PartitionRegistration.merge: a PartitionRecord sets (leader, leader epoch); a
-- PartitionChangeRecord whose leader is not -2 (NO_LEADER_CHANGE) sets the leader and bumps the
-- leader epoch by one. leader_recovery_state = 1 (RECOVERING) marks an unclean election.
-- epoch_timeline: every leader epoch with the time it began, its first leader and whether an unclean election
-- began it (array<struct<epoch int, started_at timestamp, leader int, unclean boolean>>, sorted by epoch; epochs
-- already in a snapshot began before it: epoch time 0).
-- remote_storage_enable: the topic's remote.storage.enable (tiered storage, KIP-405) from its newest ConfigRecord
-- written after its TopicRecord (or held in the snapshot); false when never set or deleted (Kafka's default).
WITH topics AS (
  SELECT topic_id, max_by(topic_name, seq) AS topic, max(seq) AS created_seq
  FROM metadata_records WHERE record_type = 'TopicRecord' AND decode_error IS NULL
  GROUP BY topic_id
),
remote_cfg AS (
  SELECT t.topic_id,
         max_by(coalesce(lower(trim(c.config_value)) = 'true', false), c.seq) AS remote_storage_enable
  FROM metadata_records c
  JOIN topics t ON c.config_resource_name = t.topic AND (c.seq > t.created_seq OR c.is_snapshot)
  WHERE c.record_type = 'ConfigRecord' AND c.decode_error IS NULL AND c.config_resource_type = 2
    AND c.config_name = 'remote.storage.enable'
  GROUP BY t.topic_id
),
removed AS (
  SELECT DISTINCT topic_id FROM metadata_records WHERE record_type = 'RemoveTopicRecord' AND decode_error IS NULL
),
changes AS (
  SELECT topic_id, partition, seq, timestamp, is_snapshot, record_type, leader_recovery_state,
         CASE WHEN record_type = 'PartitionRecord' THEN leader
              WHEN leader IS NULL OR leader = -2 THEN NULL
              ELSE leader END AS leader_set,
         CASE WHEN record_type = 'PartitionRecord' THEN leader_epoch END AS epoch_set
  FROM metadata_records
  WHERE record_type IN ('PartitionRecord', 'PartitionChangeRecord') AND decode_error IS NULL
),
grouped AS (
  SELECT *, sum(CASE WHEN record_type = 'PartitionRecord' THEN 1 ELSE 0 END)
              OVER (PARTITION BY topic_id, partition ORDER BY seq) AS grp
  FROM changes
),
replayed AS (
  SELECT *,
         first(epoch_set, true) OVER g + count(leader_set) OVER g - 1 AS epoch_now,
         last(leader_set, true) OVER g AS leader_now
  FROM grouped
  WHERE grp > 0
  WINDOW g AS (PARTITION BY topic_id, partition, grp ORDER BY seq ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)
),
epoch_starts AS (
  -- when each leader epoch began (batch timestamp; records replayed from a snapshot began before it), the
  -- leader it began with, and whether an unclean election began it (leader_recovery_state RECOVERING, KIP-704)
  SELECT topic_id, partition, epoch_now AS epoch,
         min(CASE WHEN is_snapshot THEN 0 ELSE timestamp END) AS started_ms,
         min_by(leader_now, seq) AS leader,
         bool_or(coalesce(leader_recovery_state = 1, false)) AS unclean
  FROM replayed GROUP BY topic_id, partition, epoch_now
),
timelines AS (
  SELECT topic_id, partition,
         array_sort(collect_list(named_struct('epoch', CAST(epoch AS INT), 'started_at', timestamp_millis(started_ms),
                                              'leader', CAST(leader AS INT), 'unclean', unclean)))
           AS epoch_timeline
  FROM epoch_starts GROUP BY topic_id, partition
),
state AS (
SELECT r.topic_id,
       r.partition,
       CAST(max_by(CASE WHEN leader_now >= 0 THEN leader_now END, CASE WHEN leader_now >= 0 THEN seq END) AS INT) AS last_leader,
       CAST(max_by(epoch_now, seq) AS INT) AS leader_epoch,
       CAST(sum(CASE WHEN leader_recovery_state = 1 THEN 1 ELSE 0 END) AS INT) AS unclean_elections,
       timestamp_millis(max(CASE WHEN leader_recovery_state = 1 THEN timestamp END)) AS last_unclean_election
FROM replayed r
GROUP BY r.topic_id, r.partition
)
SELECT t.topic, s.partition, s.last_leader, s.leader_epoch, s.unclean_elections, s.last_unclean_election,
       tl.epoch_timeline, coalesce(rc.remote_storage_enable, false) AS remote_storage_enable
FROM state s
JOIN topics t ON s.topic_id = t.topic_id
LEFT JOIN remote_cfg rc ON s.topic_id = rc.topic_id
JOIN timelines tl ON s.topic_id = tl.topic_id AND s.partition = tl.partition
LEFT ANTI JOIN removed x ON s.topic_id = x.topic_id
