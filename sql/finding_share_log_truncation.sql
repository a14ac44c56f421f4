-- LOG_TRUNCATION for share groups (KIP-932): a share-partition state claims offsets past the divergence point.
-- Input view: share_context (share_context.sql).  A state written under leader epoch E (the share-partition
-- leader's epoch: ShareSnapshot/ShareUpdate LeaderEpoch) counts offsets as done (below its start offset, or in
-- ACKNOWLEDGED/ARCHIVED batches) that the leader of epoch E held.  When the partition's leader-epoch history
-- ends epoch E at D (OffsetsForLeaderEpoch, as for commits), the offsets from D on were truncated under that
-- state.  Kafka's share-partition leader loads the state unchanged (SharePartition.maybeInitialize; a log start
-- or end below the start offset only logs "The log start offset: .. is not greater than the start offset"), so
-- the new lineage's records at those offsets are never delivered to the group and no client sees an error.
-- The newest record does not show it (the new leader rewrites the state under its own epoch): every leader
-- epoch's last state is judged, and per share-partition the state with the most records at risk is reported.
-- records_at_risk: done offsets from D on (those the new lineage holds or will hold there);
-- records_in_flight_lost (share_partitions, and named in the detail): offsets from max(D, SPSO) on delivered but
-- never acknowledged: the records the group holds there are gone, and the new ones at those offsets come as
-- redeliveries.  A state with only those (nothing done past D) skips nothing: no finding, the table names them.
WITH t AS (
  SELECT *,
         greatest(start_offset - epoch_end_offset, 0) + trunc_all_done AS at_risk,
         trunc_all_seen - trunc_all_done AS in_flight_lost,
         array_min(filter(epoch_timeline, x -> x.unclean AND x.epoch > written_leader_epoch)) AS ue
  FROM share_context
  WHERE epoch_end_offset >= 0 AND (start_offset > epoch_end_offset OR trunc_all_done > 0)
),
one AS (
  SELECT *, row_number() OVER (PARTITION BY group_id, topic, partition
                               ORDER BY at_risk DESC, in_flight_lost DESC, state_offset) AS rn
  FROM t
),
c AS (
  SELECT *,
         CASE WHEN ue IS NOT NULL OR (epoch_timeline IS NULL AND unclean_elections > 0) THEN 'unclean_election'
              WHEN caches_disagree THEN 'replica_divergence'
              ELSE 'unknown' END AS cause
  FROM one WHERE rn = 1 AND at_risk > 0
)
SELECT group_id, topic, partition,
       'LOG_TRUNCATION' AS finding,
       'critical' AS severity,
       start_offset AS committed_offset, written_leader_epoch AS committed_leader_epoch,
       timestamp_millis(state_written_at) AS commit_timestamp,
       epoch_end_offset AS divergence_offset, at_risk AS records_at_risk, epoch_end_offset,
       log_start_offset, log_end_offset, answered_by_broker,
       concat(
         format_string('Share group %s: its state for %s-%d (__share_group_state-%d offset %d, written under leader epoch %d: start offset %d) is past the divergence point: the leader''s epoch %d ends at offset %d (OffsetsForLeaderEpoch answered by broker %s). ',
                       group_id, topic, partition, source_partition, state_offset, written_leader_epoch, start_offset,
                       end_epoch, epoch_end_offset, coalesce(cast(answered_by_broker AS STRING), '?')),
         CASE WHEN cause = 'unclean_election' THEN
                concat('Why: ', CASE WHEN ue IS NOT NULL
                                     THEN format_string('an unclean leader election made broker %s the leader in epoch %d at %s',
                                                        coalesce(cast(ue.leader AS STRING), '?'), ue.epoch, cast(ue.started_at AS STRING))
                                     ELSE 'the partition had an unclean leader election' END,
                       format_string(', which cut the log at offset %d under this state. ', epoch_end_offset))
              WHEN cause = 'replica_divergence' THEN 'Why: replicas'' leader-epoch caches disagree (the footprint of an unclean election). '
              ELSE 'Why: the inputs show no unclean election or cache disagreement. ' END,
         format_string(
           'Risk: Kafka loads share-partition state unchanged after a truncation: the %d records the new lineage holds or will hold at the offsets this state counts as done (from %d on: below its start offset or acknowledged) are never delivered to the group, with no error to any client (%d of them are in the log now). ',
           at_risk, epoch_end_offset,
           greatest(least(start_offset, coalesce(log_end_offset, start_offset)) - epoch_end_offset, 0) + trunc_log_done),
         CASE WHEN in_flight_lost > 0 THEN format_string(
           '%d records delivered to the group but not yet acknowledged were lost with the truncated lineage: the records now at those offsets will come as redeliveries. ',
           in_flight_lost)
         ELSE '' END,
         format_string('Action: check downstream for offsets %d and up, read the records the group missed with a consumer, and to have them delivered: stop the group''s members and apply the group''s file in the audit''s reset_plan/ (kafka-share-groups --bootstrap-server <broker> --group %s --reset-offsets --from-file <file> --dry-run, then --execute; Kafka 4.4 or later).',
                       epoch_end_offset, group_id)
       ) AS detail,
       cause,
       CASE WHEN cause = 'unclean_election' THEN ue.epoch END AS cause_leader_epoch,
       CASE WHEN cause = 'unclean_election' THEN ue.leader END AS cause_leader,
       CASE WHEN cause = 'unclean_election' THEN ue.started_at END AS cause_time,
       -- of records_at_risk, those in the log now (below its log end offset): skipped already or when next fetched
       greatest(least(start_offset, coalesce(log_end_offset, start_offset)) - epoch_end_offset, 0) + trunc_log_done
         AS records_in_log
FROM c
