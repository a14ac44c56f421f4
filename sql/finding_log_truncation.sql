-- LOG_TRUNCATION (critical) [KIP-320: LOG_TRUNCATION, LogTruncationException]
-- Committed epoch E >= 0 and the leader's end offset for E (OffsetsForLeaderEpoch, FORMATS.md §4)
-- is below the committed offset O. divergence_offset = that end offset, exactly what Kafka's
-- SubscriptionState.maybeCompleteValidation puts in LogTruncationException.divergentOffsets().
-- An undefined answer (-1, -1) from an empty cache is a truncation with no known divergence point, as
-- the Java consumer treats it (divergence_offset null). An epoch above every cached epoch is not: the
-- consumer never validates it (it waits for metadata carrying that epoch, which no broker sends; the
-- Kafka lab's oracle sees no exception), so only UNKNOWN_LEADER_EPOCH reports it.
-- cause, strongest evidence first:
--   unclean_election: the KRaft metadata log's timeline has an epoch begun by an unclean election (KIP-704
--     leader_recovery_state RECOVERING) after the committed epoch and no later than the epoch offset O-1 was
--     written in; cause_leader_epoch / cause_leader / cause_time are that epoch, its leader and when it began;
--   replica_divergence: replicas' leader-epoch caches disagree about an epoch's start offset;
--   stale_client_epoch: offset O-1 (still in the log: O <= log end) was written in a newer epoch than the
--     committed one, with no sign of data loss (the consumer will rewind to the divergence offset and replay);
--   unknown: none of these.
WITH t AS (
  SELECT * FROM commit_context
  WHERE committed_leader_epoch >= 0 AND partition_known AND epoch_end_offset IS NOT NULL
    AND epoch_end_offset < committed_offset
    AND NOT coalesce(committed_leader_epoch > history_latest_epoch, false)
),
written AS (
  SELECT t.group_id, t.topic, t.partition, t.source_partition, t.source_offset, max(x.leader_epoch) AS written_epoch
  FROM t JOIN epochs x
    ON x.is_leader AND x.topic = t.topic AND x.partition = t.partition AND x.start_offset <= t.committed_offset - 1
  GROUP BY t.group_id, t.topic, t.partition, t.source_partition, t.source_offset
),
caused AS (
  SELECT t.*, w.written_epoch,
         -- bounded by the epoch offset O-1 was written in while that record still exists (O <= log end):
         -- a later unclean election did not cut it; past the log end the records are gone, any later one may have
         array_min(filter(t.epoch_timeline, x -> x.unclean AND x.epoch > t.committed_leader_epoch
                                              AND x.epoch <= CASE WHEN t.committed_offset <= t.log_end_offset
                                                                  THEN coalesce(w.written_epoch, 2147483647)
                                                                  ELSE 2147483647 END)) AS ue
  FROM t
  LEFT JOIN written w
    ON t.group_id = w.group_id AND t.topic = w.topic AND t.partition = w.partition
   AND t.source_partition = w.source_partition AND t.source_offset = w.source_offset
),
c AS (
  SELECT *,
         CASE WHEN ue IS NOT NULL THEN 'unclean_election'
              -- a source with the count of unclean elections but no timeline
              WHEN epoch_timeline IS NULL AND unclean_elections > 0 THEN 'unclean_election'
              WHEN caches_disagree THEN 'replica_divergence'
              WHEN written_epoch > committed_leader_epoch AND committed_offset <= log_end_offset THEN 'stale_client_epoch'
              ELSE 'unknown' END AS cause
  FROM caused
)
SELECT t.group_id, t.topic, t.partition,
       'LOG_TRUNCATION' AS finding, 'critical' AS severity,
       t.committed_offset, t.committed_leader_epoch, t.commit_timestamp,
       CASE WHEN t.epoch_end_offset >= 0 THEN t.epoch_end_offset END AS divergence_offset,
       CASE WHEN t.epoch_end_offset >= 0 THEN t.committed_offset - t.epoch_end_offset END AS records_at_risk,
       t.epoch_end_offset, t.log_start_offset, t.log_end_offset,
       t.previous_offset, t.previous_leader_epoch, t.answered_by_broker,
       CASE WHEN t.epoch_end_offset < 0 THEN format_string(
         'Committed offset %d (leader epoch %d) of %s-%d cannot be validated: the leader (broker %s) has no end offset for epoch %d (its newest epoch is %s), so OffsetsForLeaderEpoch answers undefined and Kafka''s consumer treats the position as truncated with no known divergence point (LogTruncationException, or a reset per auto.offset.reset). Risk: the group resumes wherever its reset policy says: loss or replay of unknown size. Action: find where processing really stopped, then kafka-consumer-groups --bootstrap-server <broker> --group %s --topic %s:%d --reset-offsets --to-offset <offset> --execute.',
         t.committed_offset, t.committed_leader_epoch, t.topic, t.partition, coalesce(cast(t.answered_by_broker AS STRING), '?'),
         t.committed_leader_epoch, coalesce(cast(t.history_latest_epoch AS STRING), 'none: empty cache'), t.group_id, t.topic, t.partition)
       ELSE concat(
         format_string('Committed offset %d (leader epoch %d) of %s-%d is past the divergence point: the leader''s epoch %d ends at offset %d (OffsetsForLeaderEpoch answered by broker %s, %s). ',
                       t.committed_offset, t.committed_leader_epoch, t.topic, t.partition,
                       t.end_epoch, t.epoch_end_offset, coalesce(cast(t.answered_by_broker AS STRING), '?'), coalesce(t.authority, 'authoritative cache')),
         CASE
           WHEN t.cause = 'unclean_election' THEN format_string(
             'Why: %s (leader_recovery_state=RECOVERING in the metadata log), so offsets %d..%d were truncated and rewritten by a new lineage. Risk: the %d records this group consumed there are gone (loss), and a client that resumes at %d without epoch validation skips the %d new records written there. ',
             CASE WHEN t.ue IS NOT NULL
                  THEN format_string('an unclean leader election made broker %s the leader in epoch %d at %s',
                                     coalesce(cast(t.ue.leader AS STRING), '?'), t.ue.epoch, cast(t.ue.started_at AS STRING))
                  ELSE concat('the partition had an unclean leader election',
                              coalesce(concat(', last at ', cast(t.last_unclean_election AS STRING)), '')) END,
             t.epoch_end_offset, t.committed_offset - 1, t.committed_offset - t.epoch_end_offset,
             t.committed_offset, t.committed_offset - t.epoch_end_offset)
           WHEN t.cause = 'replica_divergence' THEN format_string(
             'Why: replicas'' leader-epoch caches disagree about an epoch''s start offset (the footprint of an unclean election). Risk: %d records consumed past offset %d may be lost or replaced; resuming at %d without validation skips new records. ',
             t.committed_offset - t.epoch_end_offset, t.epoch_end_offset, t.committed_offset)
           WHEN t.cause = 'stale_client_epoch' THEN format_string(
             'Why: no sign of data loss; the commit carries epoch %d although offset %d was written in epoch %d (a stale client epoch). Risk: Kafka''s consumer will raise LogTruncationException or rewind to %d and replay %d records (duplicates). ',
             t.committed_leader_epoch, t.committed_offset - 1, t.written_epoch, t.epoch_end_offset, t.committed_offset - t.epoch_end_offset)
           ELSE format_string('Why: the inputs show no unclean election or cache disagreement%s. Risk: %d records between %d and %d may be lost or replayed. ',
             CASE WHEN t.committed_offset > t.log_end_offset THEN format_string(
               '; the committed offset is past the log end offset %d: the group committed records it never read, or they were lost without a trace here', t.log_end_offset)
             ELSE '' END,
             t.committed_offset - t.epoch_end_offset, t.epoch_end_offset, t.committed_offset)
         END,
         format_string('Action: check downstream for the affected range, then kafka-consumer-groups --bootstrap-server <broker> --group %s --topic %s:%d --reset-offsets --to-offset %d --execute (the group must be inactive).',
                       t.group_id, t.topic, t.partition, t.epoch_end_offset)
       ) END AS detail,
       t.cause,
       CASE WHEN t.cause = 'unclean_election' THEN t.ue.epoch END AS cause_leader_epoch,
       CASE WHEN t.cause = 'unclean_election' THEN t.ue.leader END AS cause_leader,
       CASE WHEN t.cause = 'unclean_election' THEN t.ue.started_at END AS cause_time
FROM c t
