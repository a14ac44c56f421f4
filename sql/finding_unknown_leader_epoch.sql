-- UNKNOWN_LEADER_EPOCH [UNKNOWN_LEADER_EPOCH]: committed epoch E is greater than every epoch in the
-- partition's history (or the history is empty): OffsetsForLeaderEpoch answers undefined (-1, -1) and
-- Kafka's consumer cannot validate the position. error when the history was captured after the
-- commit (the cluster never had epoch E), warning otherwise (the history may be stale).
-- Also (KIP-232, with the KRaft metadata log's timeline): E is greater than the partition's leader epoch
-- when the commit was written (leader_epoch_at_commit), even if the cluster reached E later: the client
-- claimed an epoch the cluster did not have yet, and a consumer resuming before E exists stalls. error.
SELECT group_id, topic, partition,
       'UNKNOWN_LEADER_EPOCH' AS finding,
       CASE WHEN committed_leader_epoch <= coalesce(history_latest_epoch, -1) THEN 'error'
            WHEN history_captured_at IS NULL OR history_captured_at >= commit_timestamp THEN 'error' ELSE 'warning' END AS severity,
       committed_offset, committed_leader_epoch, commit_timestamp,
       CAST(NULL AS BIGINT) AS divergence_offset, CAST(NULL AS BIGINT) AS records_at_risk,
       epoch_end_offset, log_start_offset, log_end_offset, previous_offset, previous_leader_epoch, answered_by_broker,
       CASE WHEN committed_leader_epoch <= coalesce(history_latest_epoch, -1) THEN format_string(
         'Committed leader epoch %d of %s-%d did not exist yet when the commit was written (%s): the partition''s leader epoch was %d then (KRaft metadata log); it reached %d only later. The committing client claimed an epoch from no metadata the cluster had served (a faulty or forged commit). Risk: a consumer resuming before that epoch exists stalls (it ignores older metadata), and the offset was never validated against the log. Action: verify the client, then reset explicitly: kafka-consumer-groups --bootstrap-server <broker> --group %s --topic %s:%d --reset-offsets --to-offset %d --execute.',
         committed_leader_epoch, topic, partition, cast(commit_timestamp AS STRING), leader_epoch_at_commit,
         committed_leader_epoch, group_id, topic, partition, committed_offset)
       ELSE concat(
         format_string('Committed leader epoch %d of %s-%d is newer than every epoch in the partition''s history (newest: %s; history captured %s). ',
                       committed_leader_epoch, topic, partition,
                       coalesce(cast(history_latest_epoch AS STRING), 'none, empty cache'),
                       coalesce(cast(history_captured_at AS STRING), 'at an unknown time')),
         CASE WHEN history_latest_epoch IS NULL
              THEN 'Risk: Kafka''s consumer gets an undefined OffsetsForLeaderEpoch answer and treats the position as truncated with no known divergence point (reset or LogTruncationException). '
              ELSE 'Risk: Kafka''s consumer stalls: it ignores every metadata response older than the committed epoch, so it neither fetches nor raises an error, and the group makes no progress on this partition. ' END,
         CASE WHEN history_captured_at IS NULL OR history_captured_at >= commit_timestamp
              THEN 'The history was captured after the commit, so the committing client claimed an epoch the cluster never had. '
              ELSE 'The history is older than the commit; re-run the audit with fresh log dirs. ' END,
         format_string('Action: verify the client, then reset explicitly: kafka-consumer-groups --bootstrap-server <broker> --group %s --topic %s:%d --reset-offsets --to-offset %d --execute.',
                       group_id, topic, partition, committed_offset)
       ) END AS detail
FROM commit_context
WHERE committed_leader_epoch >= 0 AND partition_known
  AND (history_latest_epoch IS NULL OR committed_leader_epoch > history_latest_epoch
       OR committed_leader_epoch > leader_epoch_at_commit)
