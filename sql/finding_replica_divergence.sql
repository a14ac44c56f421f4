-- REPLICA_DIVERGENCE (per partition, no group needed): a replica whose log holds records of a lineage the
-- partition's authoritative replica (bounds.answered_by_broker: the leader per the KRaft metadata log, else the
-- replica with the newest epoch) does not have. When that replica next fetches, it truncates them away, as
-- Kafka's follower does (AbstractFetcherThread truncation, KIP-101/KIP-279: walk OffsetsForLeaderEpoch down
-- until both leader-epoch caches agree). Because every epoch has one leader and each replica's records of
-- an epoch are a prefix of that leader's, the two logs agree up to the first offset at which their caches
-- name different epochs; that first offset is where the walk ends (divergence_offset).
--   Divergent: at that offset the replica's epoch is OLDER than the authoritative one (a later leader wrote
--   a new lineage over it). A replica whose epoch there is newer is a newer snapshot than the authoritative
--   one (a hot copy taken mid leader change), not a lost lineage, and is not reported.
-- records_at_risk = replica's log end offset - divergence_offset: records only that replica holds.
-- error when some of them were committed (below the replica's high watermark: acknowledged to acks=all
-- producers and readable by consumers) or a group consumed into them; warning when they never reached the
-- high watermark (lost only for acks=1 producers).
-- groups_consumed: groups whose commit (in the audited commits: the latest, or every one with --mode history)
-- sits past the divergence offset, within the replica's log, with the epoch that replica wrote offset O-1 in
-- and that the authoritative log does not have there: they consumed records of the lost lineage.
-- cause: unclean_election when the metadata timeline says the authoritative epoch at the divergence offset
-- was begun by an unclean election (cause_* name it), else unknown.
-- Input views: replicas (broker_id, topic, partition, log_start_offset, log_end_offset, high_watermark, damage),
-- epochs (every replica's cache; is_leader = the authoritative replica's), bounds, commits.
WITH auth AS (
  SELECT topic, partition, answered_by_broker AS leader_broker, log_start_offset, log_end_offset, epoch_timeline
  FROM bounds WHERE answered_by_broker IS NOT NULL AND topic <> '__cluster_metadata'
),
followers AS (
  SELECT r.broker_id, r.topic, r.partition, r.log_end_offset AS replica_leo, r.high_watermark AS replica_hw
  FROM replicas r JOIN auth a ON r.topic = a.topic AND r.partition = a.partition AND r.broker_id <> a.leader_broker
  WHERE r.damage IS NULL AND r.log_end_offset IS NOT NULL
),
leader_cache AS (SELECT topic, partition, leader_epoch, start_offset FROM epochs WHERE is_leader),
follower_cache AS (
  SELECT e.broker_id, e.topic, e.partition, e.leader_epoch, e.start_offset
  FROM epochs e JOIN followers f ON e.broker_id = f.broker_id AND e.topic = f.topic AND e.partition = f.partition
  WHERE NOT e.is_leader
),
-- the caches are step functions of the offset: they can first differ only where one of them steps
points AS (
  SELECT f.broker_id, f.topic, f.partition, f.replica_leo, f.replica_hw, c.start_offset AS p
  FROM followers f JOIN follower_cache c ON c.broker_id = f.broker_id AND c.topic = f.topic AND c.partition = f.partition
  WHERE c.start_offset < f.replica_leo
  UNION
  SELECT f.broker_id, f.topic, f.partition, f.replica_leo, f.replica_hw, c.start_offset AS p
  FROM followers f JOIN leader_cache c ON c.topic = f.topic AND c.partition = f.partition
  WHERE c.start_offset < f.replica_leo
),
at_point AS (
  SELECT pt.broker_id, pt.topic, pt.partition, pt.replica_leo, pt.replica_hw, pt.p,
         max(fc.leader_epoch) AS replica_epoch, max(lc.leader_epoch) AS leader_epoch
  FROM points pt
  JOIN follower_cache fc ON fc.broker_id = pt.broker_id AND fc.topic = pt.topic AND fc.partition = pt.partition
   AND fc.start_offset <= pt.p
  JOIN leader_cache lc ON lc.topic = pt.topic AND lc.partition = pt.partition AND lc.start_offset <= pt.p
  GROUP BY pt.broker_id, pt.topic, pt.partition, pt.replica_leo, pt.replica_hw, pt.p
),
div AS (
  SELECT broker_id, topic, partition, replica_leo, replica_hw,
         min_by(named_struct('p', p, 're', replica_epoch, 'le', leader_epoch), p) AS d
  FROM at_point
  WHERE replica_epoch IS NOT NULL AND leader_epoch IS NOT NULL AND replica_epoch <> leader_epoch
  GROUP BY broker_id, topic, partition, replica_leo, replica_hw
),
diverged AS (
  SELECT * FROM div WHERE d.re < d.le
),
consumed AS (
  SELECT d.broker_id, d.topic, d.partition, c.group_id
  FROM diverged d
  JOIN commits c ON c.topic = d.topic AND c.partition = d.partition
   AND c.committed_offset > d.d.p AND c.committed_offset <= d.replica_leo AND c.committed_leader_epoch >= 0
  -- the epoch the diverged replica wrote offset O-1 in, and the authoritative one's
  JOIN follower_cache fc ON fc.broker_id = d.broker_id AND fc.topic = d.topic AND fc.partition = d.partition
   AND fc.start_offset <= c.committed_offset - 1
  GROUP BY d.broker_id, d.topic, d.partition, c.group_id, c.committed_offset, c.committed_leader_epoch,
           c.source_partition, c.source_offset
  HAVING max(fc.leader_epoch) = c.committed_leader_epoch
),
consumed_groups AS (
  SELECT broker_id, topic, partition, sort_array(collect_set(group_id)) AS groups
  FROM consumed GROUP BY broker_id, topic, partition
),
j AS (
  SELECT d.*, a.leader_broker, a.log_start_offset, a.log_end_offset,
         coalesce(g.groups, array()) AS groups,
         filter(a.epoch_timeline, x -> x.epoch = d.d.le)[0] AS te
  FROM diverged d
  JOIN auth a ON a.topic = d.topic AND a.partition = d.partition
  LEFT JOIN consumed_groups g ON g.broker_id = d.broker_id AND g.topic = d.topic AND g.partition = d.partition
)
SELECT CAST(NULL AS STRING) AS group_id, topic, partition,
       'REPLICA_DIVERGENCE' AS finding,
       CASE WHEN size(groups) > 0 OR coalesce(replica_hw, 0) > d.p THEN 'error' ELSE 'warning' END AS severity,
       CAST(NULL AS BIGINT) AS committed_offset, CAST(NULL AS INT) AS committed_leader_epoch,
       CAST(NULL AS TIMESTAMP) AS commit_timestamp,
       d.p AS divergence_offset, replica_leo - d.p AS records_at_risk,
       CAST(NULL AS BIGINT) AS epoch_end_offset, log_start_offset, log_end_offset,
       CAST(NULL AS BIGINT) AS previous_offset, d.re AS previous_leader_epoch,
       leader_broker AS answered_by_broker,
       concat(
         format_string('Broker %d''s replica of %s-%d holds offsets %d..%d (%d records, leader epoch %d and before) that the partition''s log (broker %d, leader epoch %d from offset %d) does not have: ',
                       broker_id, topic, partition, d.p, replica_leo - 1, replica_leo - d.p, d.re, leader_broker, d.le, d.p),
         CASE WHEN te.unclean THEN format_string('an unclean leader election made broker %d leader in epoch %d at %s and wrote a new lineage from offset %d. ',
                                                 te.leader, te.epoch, cast(te.started_at AS STRING), d.p)
              ELSE 'a later leader wrote a new lineage over them. ' END,
         CASE WHEN coalesce(replica_hw, 0) > d.p
              THEN format_string('%d of them were below that replica''s high watermark (%d): committed records, acknowledged to acks=all producers and readable by consumers, are lost. ',
                                 least(replica_hw, replica_leo) - d.p, replica_hw)
              ELSE 'None of them reached that replica''s high watermark: they are lost for producers that used acks=1. ' END,
         CASE WHEN size(groups) > 0
              THEN format_string('%d group(s) consumed into them: %s%s. ', size(groups),
                                 array_join(slice(groups, 1, 20), ', '), CASE WHEN size(groups) > 20 THEN ', ...' ELSE '' END)
              ELSE '' END,
         format_string('Risk: when broker %d fetches again it truncates its log to offset %d and those records are gone for good. Action: before that broker rejoins, copy the partition''s segments from it (kafka-dump-log --files ... --print-data-log from offset %d) if the records must be recovered, and check the listed groups for records they processed that no longer exist.',
                       broker_id, d.p, d.p)
       ) AS detail,
       CASE WHEN te.unclean THEN 'unclean_election' ELSE 'unknown' END AS cause,
       CASE WHEN te.unclean THEN te.epoch END AS cause_leader_epoch,
       CASE WHEN te.unclean THEN te.leader END AS cause_leader,
       CASE WHEN te.unclean THEN te.started_at END AS cause_time,
       broker_id AS replica_broker,
       groups AS groups_consumed
FROM j
