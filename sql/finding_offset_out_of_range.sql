-- OFFSET_OUT_OF_RANGE [OFFSET_OUT_OF_RANGE]: committed offset O < log start offset (records deleted before
-- the group read them; the consumer will reset) or O > log end offset (KAFKA-6262; "negative lag",
-- which other tools clamp to 0). Never clamped here.
SELECT group_id, topic, partition,
       'OFFSET_OUT_OF_RANGE' AS finding, 'error' AS severity,
       committed_offset, committed_leader_epoch, commit_timestamp,
       CAST(NULL AS BIGINT) AS divergence_offset,
       CASE WHEN committed_offset < log_start_offset THEN log_start_offset - committed_offset
            ELSE committed_offset - log_end_offset END AS records_at_risk,
       epoch_end_offset, log_start_offset, log_end_offset, previous_offset, previous_leader_epoch, answered_by_broker,
       CASE WHEN committed_offset < log_start_offset THEN format_string(
              'Committed offset %d of %s-%d is below the log start offset %d by %d: those records were deleted (retention or delete-records) before the group read them. Risk: the consumer gets OFFSET_OUT_OF_RANGE and resets per auto.offset.reset (earliest: %d records never processed are lost to it; latest: everything up to the end is skipped; none: it stops). Action: kafka-consumer-groups --bootstrap-server <broker> --group %s --topic %s:%d --reset-offsets --to-earliest --execute, and account for the %d lost records.',
              committed_offset, topic, partition, log_start_offset, log_start_offset - committed_offset,
              log_start_offset - committed_offset, group_id, topic, partition, log_start_offset - committed_offset)
            ELSE format_string(
              'Committed offset %d of %s-%d is above the log end offset %d by %d (negative lag, KAFKA-6262): the log no longer reaches the committed position (truncation, or a reset beyond the end). Risk: the consumer gets OFFSET_OUT_OF_RANGE and resets; with latest it silently skips the next %d records written. Action: kafka-consumer-groups --bootstrap-server <broker> --group %s --topic %s:%d --reset-offsets --to-offset %d --execute after deciding where processing really stopped.',
              committed_offset, topic, partition, log_end_offset, committed_offset - log_end_offset,
              committed_offset - log_end_offset, group_id, topic, partition, log_end_offset)
       END AS detail
FROM commit_context
WHERE partition_known AND log_start_offset IS NOT NULL AND log_end_offset IS NOT NULL
  AND (committed_offset < log_start_offset OR committed_offset > log_end_offset)
