-- Share-partition states (KIP-932) as the share coordinator holds them, at the records the share rules judge.
-- Input views: share_records (decoded __share_group_state records, audit.formats.share_state.SHARE_RAW_SCHEMA
-- without decode errors: group_id, topic_id, partition, source_partition, offset, timestamp, record_type (0
-- ShareSnapshot, 1 ShareUpdate), is_tombstone, state_epoch, leader_epoch, start_offset,
-- delivery_complete_count), share_topic_names (topic_id, topic).
-- Replay per share-partition key (group, topic id, partition) in log order, as ShareCoordinatorShard.replay
-- does: a ShareSnapshot replaces the state (a tombstone deletes it), a ShareUpdate merges onto it: its
-- StartOffset and LeaderEpoch unless -1 (ShareCoordinatorShard.merge).  The state's leader epoch is the epoch of
-- the share-partition leader that wrote it (a fencing token, raised to the highest seen), not the epoch of the
-- records: the rules place each state against the partition's leader-epoch history by that epoch.
-- Only the key's current generation counts (records after its last tombstone; a key whose last record is a
-- tombstone has no state).
-- Every record of the current generation is a row (its state_batches make up the states after it); judged = true
-- on the records the rules judge: per key and written leader epoch, the last record written under that epoch (the
-- furthest that leader's state reached), and the key's newest record (is_current = true).
-- Columns: group_id string, topic_id string, topic string (null: the topic id is not among the inputs' topics),
-- partition int, seg_offset bigint (offset of the snapshot the state starts from; null: updates only),
-- state_offset bigint (the record's offset in __share_group_state), source_partition int, state_written_at
-- bigint (ms), written_leader_epoch int, state_epoch int, start_offset bigint (the share-partition start offset,
-- SPSO; -1 = not initialised), delivery_complete_count int (-1 = unknown), state_batches (the record's own
-- batches: array<struct<first_offset bigint, last_offset bigint, delivery_state tinyint, delivery_count smallint>>),
-- judged boolean, is_current boolean.
WITH keyed AS (
  SELECT *,
         sum(CASE WHEN is_tombstone THEN 1 ELSE 0 END) OVER w AS tomb_gen,
         max(CASE WHEN record_type = 0 THEN offset END) OVER w AS seg_offset
  FROM share_records
  WINDOW w AS (PARTITION BY group_id, topic_id, partition ORDER BY source_partition, offset
               ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)
),
current_gen AS (
  SELECT group_id, topic_id, partition, max(tomb_gen) AS gen,
         max_by(is_tombstone, struct(source_partition, offset)) AS ends_deleted
  FROM keyed GROUP BY group_id, topic_id, partition
),
replayed AS (
  SELECT k.*,
         last(CASE WHEN k.start_offset <> -1 THEN k.start_offset END, true) OVER ws AS spso,
         max(CASE WHEN k.leader_epoch >= 0 THEN k.leader_epoch END) OVER ws AS written_leader_epoch,
         max(k.state_epoch) OVER ws AS seg_state_epoch,
         row_number() OVER (PARTITION BY k.group_id, k.topic_id, k.partition
                            ORDER BY k.source_partition DESC, k.offset DESC) AS newest
  FROM keyed k
  JOIN current_gen g
    ON k.group_id = g.group_id AND k.topic_id = g.topic_id AND k.partition = g.partition
   AND k.tomb_gen = g.gen AND NOT g.ends_deleted
  WHERE NOT k.is_tombstone
  WINDOW ws AS (PARTITION BY k.group_id, k.topic_id, k.partition, k.seg_offset ORDER BY k.source_partition, k.offset
                ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)
),
ranked AS (
  SELECT *, row_number() OVER (PARTITION BY group_id, topic_id, partition, written_leader_epoch
                               ORDER BY source_partition DESC, offset DESC) AS last_in_epoch
  FROM replayed
)
SELECT r.group_id, r.topic_id, n.topic, r.partition, r.seg_offset, r.offset AS state_offset, r.source_partition,
       r.timestamp AS state_written_at, CAST(r.written_leader_epoch AS INT) AS written_leader_epoch,
       CAST(r.seg_state_epoch AS INT) AS state_epoch, CAST(coalesce(r.spso, -1) AS BIGINT) AS start_offset,
       CAST(r.delivery_complete_count AS INT) AS delivery_complete_count, r.state_batches,
       r.last_in_epoch = 1 OR r.newest = 1 AS judged, r.newest = 1 AS is_current
FROM ranked r
LEFT JOIN share_topic_names n ON r.topic_id = n.topic_id
