-- OFFSET_REWIND [Burrow's REWIND]: a later commit of the group-partition is lower than the one before
-- it, with no tombstone between (commit_context holds live commits only).
SELECT group_id, topic, partition,
       'OFFSET_REWIND' AS finding, 'warning' AS severity,
       committed_offset, committed_leader_epoch, commit_timestamp,
       CAST(NULL AS BIGINT) AS divergence_offset, previous_offset - committed_offset AS records_at_risk,
       epoch_end_offset, log_start_offset, log_end_offset, previous_offset, previous_leader_epoch, answered_by_broker,
       format_string('Group %s moved %s-%d back from offset %d (epoch %d, %s) to %d (epoch %d): %d records will be consumed again (duplicates). Action: confirm the rewind was intended (a seek or reset); if not, find the client that committed it and reset forward with kafka-consumer-groups --reset-offsets --to-offset %d.',
                     group_id, topic, partition, previous_offset, previous_leader_epoch, cast(previous_timestamp AS STRING),
                     committed_offset, committed_leader_epoch, previous_offset - committed_offset, previous_offset) AS detail
FROM commit_context
WHERE previous_offset IS NOT NULL AND committed_offset < previous_offset
