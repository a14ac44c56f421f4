-- Each judged share-partition state (share_states.sql) with what the share rules need: the OffsetsForLeaderEpoch
-- answer for the leader epoch it was written under, the partition's bounds, and counts over its persisted batches.
-- Input views: share_states, share_epoch_end_offsets (epoch_end_offsets.sql over the states' written epochs),
-- share_bounds (the judge's bounds).
-- The batches of a state are the batches of every record of its key from its snapshot up to it (the coordinator
-- merges them, PersisterStateBatchCombiner).  An offset is done when it is below the start offset (SPSO) or in an
-- ACKNOWLEDGED (2) or ARCHIVED (4) batch: the share-partition never delivers it again.  An AVAILABLE (0) batch with
-- a delivery count above 0 holds records delivered but never acknowledged.  Overlapping batches are counted once
-- (the length of their union): Kafka never makes a done offset available again, so a terminal batch outranks any
-- other over the same offsets, as its (delivery count, state) order in the combiner gives.
-- Windows counted, per state: trunc_all / trunc_log = [max(SPSO, D), inf) and [.., log end offset) where D is
-- the end offset of the state's leader epoch; cur_all = [SPSO, inf); cur_lso = [SPSO, log start offset).
-- Columns: the share_states columns, end_epoch int, epoch_end_offset bigint, answered_by_broker int,
-- log_start_offset, log_end_offset, high_watermark bigint, caches_disagree boolean, unclean_elections int,
-- epoch_timeline, partition_known boolean, and per window w in (trunc_all, trunc_log, cur_all, cur_lso):
-- w_done bigint (terminal offsets in w), w_seen bigint (terminal or delivered-unacknowledged offsets in w).
WITH j AS (
  SELECT s.group_id, s.topic_id, s.topic, s.partition, s.seg_offset, s.state_offset, s.source_partition,
         s.state_written_at, s.written_leader_epoch, s.state_epoch, s.start_offset, s.delivery_complete_count,
         s.is_current,
         e.leader_epoch AS end_epoch, e.end_offset AS epoch_end_offset,
         coalesce(e.answered_by_broker, b.answered_by_broker) AS answered_by_broker,
         b.log_start_offset, b.log_end_offset, b.high_watermark, b.caches_disagree, b.unclean_elections,
         b.epoch_timeline, b.authority, b.topic IS NOT NULL AS partition_known
  FROM share_states s
  LEFT JOIN share_bounds b ON s.topic = b.topic AND s.partition = b.partition
  LEFT JOIN share_epoch_end_offsets e
    ON s.topic = e.topic AND s.partition = e.partition AND s.written_leader_epoch = e.requested_epoch
  WHERE s.judged AND s.topic IS NOT NULL AND s.start_offset >= 0
),
w AS (
  SELECT group_id, topic_id, partition, seg_offset, state_offset, 'trunc_all' AS kind,
         greatest(start_offset, epoch_end_offset) AS lo, CAST(NULL AS BIGINT) AS hi
  FROM j WHERE epoch_end_offset >= 0
  UNION ALL
  SELECT group_id, topic_id, partition, seg_offset, state_offset, 'trunc_log',
         greatest(start_offset, epoch_end_offset), log_end_offset
  FROM j WHERE epoch_end_offset >= 0 AND log_end_offset IS NOT NULL
  UNION ALL
  SELECT group_id, topic_id, partition, seg_offset, state_offset, 'cur_all', start_offset, CAST(NULL AS BIGINT)
  FROM j WHERE is_current
  UNION ALL
  SELECT group_id, topic_id, partition, seg_offset, state_offset, 'cur_lso', start_offset, log_start_offset
  FROM j WHERE is_current AND start_offset < log_start_offset
),
batches AS (
  SELECT group_id, topic_id, partition, seg_offset, state_offset AS rec_offset, x.first_offset, x.last_offset,
         x.delivery_state IN (2, 4) AS done,
         x.delivery_state IN (2, 4) OR (x.delivery_state = 0 AND x.delivery_count > 0) AS seen
  FROM share_states LATERAL VIEW explode(state_batches) t AS x
),
clipped AS (
  SELECT w.group_id, w.topic_id, w.partition, w.state_offset, w.kind, b.done, b.seen,
         greatest(b.first_offset, w.lo) AS f,
         CASE WHEN w.hi IS NULL THEN b.last_offset ELSE least(b.last_offset, w.hi - 1) END AS l
  FROM w JOIN batches b
    ON w.group_id = b.group_id AND w.topic_id = b.topic_id AND w.partition = b.partition
   AND w.seg_offset <=> b.seg_offset AND b.rec_offset <= w.state_offset
  WHERE b.seen AND b.last_offset >= w.lo
),
swept AS (
  -- the length of a union of intervals: each interval adds what lies past every earlier-starting one's end
  SELECT group_id, topic_id, partition, state_offset, kind, measure, f, l,
         max(l) OVER (PARTITION BY group_id, topic_id, partition, state_offset, kind, measure ORDER BY f, l
                      ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS reach
  FROM (
    SELECT *, 'done' AS measure FROM clipped WHERE done AND f <= l
    UNION ALL
    SELECT *, 'seen' AS measure FROM clipped WHERE f <= l
  )
),
counted AS (
  SELECT group_id, topic_id, partition, state_offset,
         sum(CASE WHEN kind = 'trunc_all' AND measure = 'done' THEN n END) AS trunc_all_done,
         sum(CASE WHEN kind = 'trunc_all' AND measure = 'seen' THEN n END) AS trunc_all_seen,
         sum(CASE WHEN kind = 'trunc_log' AND measure = 'done' THEN n END) AS trunc_log_done,
         sum(CASE WHEN kind = 'trunc_log' AND measure = 'seen' THEN n END) AS trunc_log_seen,
         sum(CASE WHEN kind = 'cur_all' AND measure = 'done' THEN n END) AS cur_all_done,
         sum(CASE WHEN kind = 'cur_all' AND measure = 'seen' THEN n END) AS cur_all_seen,
         sum(CASE WHEN kind = 'cur_lso' AND measure = 'done' THEN n END) AS cur_lso_done,
         sum(CASE WHEN kind = 'cur_lso' AND measure = 'seen' THEN n END) AS cur_lso_seen
  FROM (
    SELECT *, greatest(0, l - greatest(f, coalesce(reach + 1, f)) + 1) AS n FROM swept
  )
  GROUP BY group_id, topic_id, partition, state_offset
)
SELECT j.*,
       CAST(coalesce(c.trunc_all_done, 0) AS BIGINT) AS trunc_all_done,
       CAST(coalesce(c.trunc_all_seen, 0) AS BIGINT) AS trunc_all_seen,
       CAST(coalesce(c.trunc_log_done, 0) AS BIGINT) AS trunc_log_done,
       CAST(coalesce(c.trunc_log_seen, 0) AS BIGINT) AS trunc_log_seen,
       CAST(coalesce(c.cur_all_done, 0) AS BIGINT) AS cur_all_done,
       CAST(coalesce(c.cur_all_seen, 0) AS BIGINT) AS cur_all_seen,
       CAST(coalesce(c.cur_lso_done, 0) AS BIGINT) AS cur_lso_done,
       CAST(coalesce(c.cur_lso_seen, 0) AS BIGINT) AS cur_lso_seen
FROM j
LEFT JOIN counted c
  ON j.group_id = c.group_id AND j.topic_id = c.topic_id AND j.partition = c.partition
 AND j.state_offset = c.state_offset
