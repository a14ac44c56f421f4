-- EPOCH_UNVERIFIABLE (info): leader epoch -1 (OffsetCommitValue v0-v2, or a tool that commits without an
-- epoch such as kafka-consumer-groups --reset-offsets): no client can check it for truncation
-- (KAFKA-19902). Also raised when no replica of the partition is among the inputs.
SELECT group_id, topic, partition,
       'EPOCH_UNVERIFIABLE' AS finding, 'info' AS severity,
       committed_offset, committed_leader_epoch, commit_timestamp,
       CAST(NULL AS BIGINT) AS divergence_offset, CAST(NULL AS BIGINT) AS records_at_risk,
       epoch_end_offset, log_start_offset, log_end_offset, previous_offset, previous_leader_epoch, answered_by_broker,
       CASE WHEN NOT partition_known THEN format_string(
              'No replica of %s-%d is among the inputs (topic deleted, or its brokers'' log dirs not given): committed offset %d (epoch %d) cannot be checked. Action: add the log dirs of the brokers hosting %s, or delete the stale offsets of group %s.',
              topic, partition, committed_offset, committed_leader_epoch, topic, group_id)
            ELSE concat(format_string(
              'Committed offset %d of %s-%d carries no leader epoch (value version %d): Kafka''s consumer cannot validate it against the log and will not detect truncation. ',
              committed_offset, topic, partition, value_version),
              CASE WHEN unclean_elections > 0 THEN 'This partition had an unclean leader election: the offset may point into a different lineage than the one the group read. ' ELSE '' END,
              'Action: prefer committing through a consumer (which records the epoch); after kafka-consumer-groups --reset-offsets the next consumer commit restores it.')
       END AS detail
FROM commit_context
WHERE committed_leader_epoch < 0 OR NOT partition_known
