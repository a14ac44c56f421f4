-- Every live commit with what the rules need: its predecessor in log order (no tombstone
-- between: commits holds live commits only), the highest-epoch earlier commit, the
-- OffsetsForLeaderEpoch answer for its epoch, and the partition's bounds.
-- Input views: commits, bounds, epoch_end_offsets, epochs.  {judge_all}: history mode.
WITH ordered AS (
  SELECT c.*,
         lag(committed_offset) OVER w AS previous_offset,
         lag(committed_leader_epoch) OVER w AS previous_leader_epoch,
         lag(commit_timestamp) OVER w AS previous_timestamp,
         max(committed_leader_epoch) OVER wp AS prior_max_epoch,
         max_by(named_struct('o', committed_offset, 'e', committed_leader_epoch, 't', commit_timestamp),
                named_struct('e', committed_leader_epoch, 'p', source_partition, 's', source_offset)) OVER wp AS prior_ref
  FROM commits c
  WINDOW w AS (PARTITION BY group_id, topic, partition ORDER BY source_partition, source_offset),
         wp AS (PARTITION BY group_id, topic, partition ORDER BY source_partition, source_offset
                ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)
),
latest_epoch AS (
  SELECT topic, partition, max(leader_epoch) AS history_latest_epoch FROM epochs WHERE is_leader GROUP BY topic, partition
)
SELECT o.*,
       e.leader_epoch AS end_epoch,
       e.end_offset AS epoch_end_offset,
       coalesce(e.answered_by_broker, b.answered_by_broker) AS answered_by_broker,
       b.log_start_offset, b.log_end_offset, b.high_watermark, b.history_captured_at,
       b.caches_disagree, b.unclean_elections, b.last_unclean_election, b.authority, b.epoch_timeline,
       b.topic IS NOT NULL AS partition_known,
       greatest(l.history_latest_epoch, b.metadata_leader_epoch) AS history_latest_epoch,
       -- the partition's leader epoch when the commit was written (KRaft metadata log; 1 s of clock slack
       -- between the controller that wrote the epoch and the coordinator that stamped the commit)
       array_max(transform(filter(b.epoch_timeline, x -> x.started_at <= o.commit_timestamp + INTERVAL 1 SECOND),
                           x -> x.epoch)) AS leader_epoch_at_commit
FROM ordered o
LEFT JOIN bounds b ON o.topic = b.topic AND o.partition = b.partition
LEFT JOIN epoch_end_offsets e
  ON o.topic = e.topic AND o.partition = e.partition AND o.committed_leader_epoch = e.requested_epoch
LEFT JOIN latest_epoch l ON o.topic = l.topic AND o.partition = l.partition
WHERE o.is_latest OR {judge_all}
