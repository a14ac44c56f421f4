-- OFFSET_OUT_OF_RANGE for share groups (KIP-932): a share-partition's start offset (SPSO) is below the log start
-- offset, and records between them that the group never finished were deleted (retention or deleteRecords).
-- Input view: share_context (share_context.sql), the share-partition's newest state.  Kafka's share-partition
-- leader moves its start offset to the log start offset on the next fetch (SharePartition.updateCacheAndOffsets)
-- and writes it lazily, so the persisted SPSO can lag behind for a while; the records below the log start that
-- the state does not count as done are gone either way: the group never gets (or never finishes) them.
-- records_at_risk: offsets in [SPSO, log start offset) not acknowledged or archived.
WITH t AS (
  SELECT *, log_start_offset - start_offset - cur_lso_done AS lost, cur_lso_seen - cur_lso_done AS unfinished
  FROM share_context
  WHERE is_current AND partition_known AND log_start_offset IS NOT NULL AND start_offset < log_start_offset
)
SELECT group_id, topic, partition,
       'OFFSET_OUT_OF_RANGE' AS finding, 'error' AS severity,
       start_offset AS committed_offset, written_leader_epoch AS committed_leader_epoch,
       timestamp_millis(state_written_at) AS commit_timestamp,
       CAST(NULL AS BIGINT) AS divergence_offset, lost AS records_at_risk, epoch_end_offset,
       log_start_offset, log_end_offset, answered_by_broker,
       format_string('Share group %s: the start offset %d of its share-partition %s-%d (__share_group_state-%d offset %d) is below the log start offset %d: %d records it had not acknowledged were deleted (retention or delete-records) before the group finished them%s. Risk: Kafka moves the share-partition start offset to the log start offset on the next fetch: those records are never delivered (or redelivered), with no error to any client. Action: account for the %d lost records downstream; raise the topic''s retention if the group cannot keep up (kafka-share-groups --bootstrap-server <broker> --describe --group %s shows its lag).',
                     group_id, start_offset, topic, partition, source_partition, state_offset, log_start_offset, lost,
                     CASE WHEN unfinished > 0 THEN format_string(' (%d of them delivered but never acknowledged)', unfinished) ELSE '' END,
                     lost, group_id) AS detail,
       CAST(0 AS BIGINT) AS records_in_log  -- deleted: none of them is in the log
FROM t
WHERE lost > 0
