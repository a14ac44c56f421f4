-- The share_partitions table (KIP-932): one row per share-partition with state, its newest state, lag and verdict.
-- Input views: share_context (share_context.sql), share_findings (the share rules' findings).
-- lag = the partition's end offset (high watermark, else log end offset) - start offset - offsets done at or
-- above the start offset: what GroupCoordinatorService computes from the SPSO and DeliveryCompleteCount (records
-- acquired but not yet acknowledged count as lag).  records_in_log: of records_at_risk, those in the log now (a
-- truncation: skipped already, or when next fetched; deleted records are not).  records_in_flight_lost: see
-- finding_share_log_truncation.sql.
WITH f AS (
  SELECT group_id, topic, partition,
         max_by(finding, struct(CASE severity WHEN 'critical' THEN 4 WHEN 'error' THEN 3 WHEN 'warning' THEN 2 ELSE 1 END,
                                CASE finding WHEN 'LOG_TRUNCATION' THEN 2 ELSE 1 END)) AS verdict,
         max(records_at_risk) AS records_at_risk, max(records_in_log) AS records_in_log,
         max(CASE WHEN finding = 'LOG_TRUNCATION' THEN divergence_offset END) AS divergence_offset
  FROM share_findings GROUP BY group_id, topic, partition
),
lost AS (
  SELECT group_id, topic, partition, max(trunc_all_seen - trunc_all_done) AS in_flight_lost,
         max_by(epoch_end_offset, trunc_all_seen - trunc_all_done) AS divergence_offset
  FROM share_context
  WHERE epoch_end_offset >= 0 AND (start_offset > epoch_end_offset OR trunc_all_seen > 0)
  GROUP BY group_id, topic, partition
)
SELECT c.group_id, c.topic, c.partition, c.topic_id,
       c.start_offset, c.written_leader_epoch AS leader_epoch, c.state_epoch, c.delivery_complete_count,
       timestamp_millis(c.state_written_at) AS state_written_at,
       c.log_start_offset, c.log_end_offset, c.high_watermark,
       CAST(coalesce(c.high_watermark, c.log_end_offset) - c.start_offset - c.cur_all_done AS BIGINT) AS lag,
       coalesce(f.verdict, 'OK') AS verdict, f.records_at_risk, CAST(f.records_in_log AS BIGINT) AS records_in_log,
       coalesce(f.divergence_offset, l.divergence_offset) AS divergence_offset,
       CAST(l.in_flight_lost AS BIGINT) AS records_in_flight_lost
FROM share_context c
LEFT JOIN f ON c.group_id = f.group_id AND c.topic = f.topic AND c.partition = f.partition
LEFT JOIN lost l ON c.group_id = l.group_id AND c.topic = l.topic AND c.partition = l.partition
WHERE c.is_current
