-- What OffsetsForLeaderEpoch answers for every (topic-partition, committed leader epoch),
-- computed from the authoritative replica's leader-epoch cache (epochs WHERE is_leader) and
-- its log end offset (bounds), exactly as Kafka's LeaderEpochFileCache.endOffsetFor:
--   requested = latest cached epoch          -> (requested, log end offset)
--   some cached epoch > requested            -> (largest cached epoch <= requested, start of the next higher epoch)
--   requested below every cached epoch       -> (requested, start offset of the first cached epoch)
--   requested above every cached epoch/empty -> (-1, -1)  (undefined)
-- except that an epoch above every cached one but not above the partition's leader epoch in the KRaft
-- metadata log (bounds.metadata_leader_epoch) did exist: a leader records (epoch, log end offset) in its
-- cache when it takes over (Partition.makeLeader -> maybeAssignEpochStartOffset), so the cache of the
-- leader of that epoch ends it at the log end offset; a replica that only followed then has no entry,
-- because no batch carried that epoch. Answer as that leader would: (floor epoch or requested, log end).
-- {epoch_requests}: the view of (topic, partition, committed_leader_epoch) to answer (the judge: commits; share
-- groups: share_epoch_requests); {epochs}, {bounds}: the views of those tables.
WITH leader_cache AS (
  SELECT topic, partition, leader_epoch, start_offset FROM {epochs} WHERE is_leader
),
requests AS (
  SELECT DISTINCT topic, partition, committed_leader_epoch AS requested_epoch
  FROM {epoch_requests} WHERE committed_leader_epoch >= 0
),
latest AS (
  SELECT topic, partition, max(leader_epoch) AS latest_epoch FROM leader_cache GROUP BY topic, partition
),
higher AS (
  SELECT r.topic, r.partition, r.requested_epoch, min_by(c.start_offset, c.leader_epoch) AS next_start
  FROM requests r JOIN leader_cache c
    ON r.topic = c.topic AND r.partition = c.partition AND c.leader_epoch > r.requested_epoch
  GROUP BY r.topic, r.partition, r.requested_epoch
),
floor AS (
  SELECT r.topic, r.partition, r.requested_epoch, max(c.leader_epoch) AS floor_epoch
  FROM requests r JOIN leader_cache c
    ON r.topic = c.topic AND r.partition = c.partition AND c.leader_epoch <= r.requested_epoch
  GROUP BY r.topic, r.partition, r.requested_epoch
)
SELECT r.topic, r.partition, r.requested_epoch,
       CAST(CASE WHEN r.requested_epoch > coalesce(l.latest_epoch, -1) AND r.requested_epoch <= b.metadata_leader_epoch
                   THEN CASE WHEN r.requested_epoch = b.metadata_leader_epoch OR l.latest_epoch IS NULL THEN r.requested_epoch
                             ELSE l.latest_epoch END
                 WHEN l.latest_epoch IS NULL THEN -1
                 WHEN r.requested_epoch = l.latest_epoch THEN r.requested_epoch
                 WHEN h.next_start IS NULL THEN -1
                 WHEN f.floor_epoch IS NULL THEN r.requested_epoch
                 ELSE f.floor_epoch END AS INT) AS leader_epoch,
       CAST(CASE WHEN r.requested_epoch > coalesce(l.latest_epoch, -1) AND r.requested_epoch <= b.metadata_leader_epoch
                   THEN b.log_end_offset
                 WHEN l.latest_epoch IS NULL THEN -1
                 WHEN r.requested_epoch = l.latest_epoch THEN b.log_end_offset
                 WHEN h.next_start IS NULL THEN -1
                 ELSE h.next_start END AS BIGINT) AS end_offset,
       b.answered_by_broker
FROM requests r
LEFT JOIN latest l ON r.topic = l.topic AND r.partition = l.partition
LEFT JOIN higher h ON r.topic = h.topic AND r.partition = h.partition AND r.requested_epoch = h.requested_epoch
LEFT JOIN floor f ON r.topic = f.topic AND r.partition = f.partition AND r.requested_epoch = f.requested_epoch
LEFT JOIN {bounds} b ON r.topic = b.topic AND r.partition = b.partition
