-- BEHIND_METADATA_EPOCH [INVALID_METADATA_EPOCH, KIP-232]: a commit's leader epoch is lower than an
-- epoch the same group already committed for the partition (no tombstone between). error when the
-- commit also moves the offset forward (a stale or zombie client), warning for a backward move
-- (a seek, or a zombie's late commit; also reported as OFFSET_REWIND).
-- previous_* name the commit it regressed from (the latest earlier commit with the highest epoch).
SELECT group_id, topic, partition,
       'BEHIND_METADATA_EPOCH' AS finding,
       CASE WHEN committed_offset > prior_ref.o THEN 'error' ELSE 'warning' END AS severity,
       committed_offset, committed_leader_epoch, commit_timestamp,
       CAST(NULL AS BIGINT) AS divergence_offset, CAST(NULL AS BIGINT) AS records_at_risk,
       epoch_end_offset, log_start_offset, log_end_offset,
       prior_ref.o AS previous_offset, prior_ref.e AS previous_leader_epoch, answered_by_broker,
       concat(
         format_string('Group %s committed %s-%d at offset %d with leader epoch %d after it had committed offset %d with epoch %d (at %s): the committer''s view of the partition went backwards, which the coordinator refuses under KIP-232. ',
                       group_id, topic, partition, committed_offset, committed_leader_epoch,
                       prior_ref.o, prior_ref.e, cast(prior_ref.t AS STRING)),
         CASE WHEN committed_offset > prior_ref.o
              THEN 'Risk: a stale or zombie client moved the offset forward on old metadata; Kafka''s consumer may later see this as truncation and rewind (duplicates), or records between the two offsets were skipped. Action: find the client committing with stale metadata (old client, zombie instance), stop it, and confirm the position. '
              ELSE 'Risk: the offset moved back with an older epoch (a seek, or a zombie''s late commit): records will be re-read (duplicates). Action: confirm the rewind was intended; otherwise reset forward. ' END
       ) AS detail
FROM commit_context
WHERE committed_leader_epoch >= 0 AND prior_max_epoch IS NOT NULL AND prior_max_epoch > committed_leader_epoch
