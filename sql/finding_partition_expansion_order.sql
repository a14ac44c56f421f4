-- PARTITION_EXPANSION_ORDER (warning) [KIP-253]: when a topic's partition count grew at time T, the keyed
-- records a producer sent before T went to hash(key) % old count, those after T may go to a new partition.
-- A group that consumed on a new partition (its first commit there past offset 0) while its committed offset
-- on an old partition was still below where that partition's log stood at T may have processed a key's newer
-- records before its older ones. One row per such old partition: committed_offset is the group's commit on it
-- just before that first commit on the new partition (same __consumer_offsets partition: log order is exact)
-- or in the same request (committed together, so not behind it),
-- offset_at_expansion where its log stood at T (Kafka's ListOffsets(T) over the segments, or the log end
-- offset when no record is that late), records_at_risk the records between, expansion_partition the new
-- partition, cause_time T. Old partitions the group had not committed on by then are not judged.
-- Input views: expansion_offsets (audit.sources.expansion), commits (every live commit: --mode history).
WITH exp AS (
  SELECT DISTINCT topic, expanded_at, new_partitions FROM expansion_offsets
),
first_new AS (
  SELECT c.group_id, c.topic, e.expanded_at,
         min_by(named_struct('p', c.partition, 'o', c.committed_offset, 't', c.commit_timestamp,
                             'sp', c.source_partition, 'so', c.source_offset),
                named_struct('sp', c.source_partition, 'so', c.source_offset)) AS f
  FROM commits c JOIN exp e ON c.topic = e.topic AND array_contains(e.new_partitions, c.partition)
  WHERE c.committed_offset > 0
  GROUP BY c.group_id, c.topic, e.expanded_at
),
old_at AS (
  SELECT f.group_id, f.topic, f.expanded_at, f.f, x.partition, x.offset_at_expansion,
         max_by(named_struct('o', c.committed_offset, 'e', c.committed_leader_epoch, 't', c.commit_timestamp),
                c.source_offset) AS then
  FROM first_new f
  JOIN expansion_offsets x ON x.topic = f.topic AND x.expanded_at = f.expanded_at
  JOIN commits c ON c.group_id = f.group_id AND c.topic = f.topic AND c.partition = x.partition
   AND c.source_partition = f.f.sp
   -- before it in the log, or in the same OffsetCommit request (one commit timestamp for all its partitions)
   AND (c.source_offset < f.f.so OR c.commit_timestamp = f.f.t)
  WHERE x.offset_at_expansion IS NOT NULL
  GROUP BY f.group_id, f.topic, f.expanded_at, f.f, x.partition, x.offset_at_expansion
)
SELECT group_id, topic, partition,
       'PARTITION_EXPANSION_ORDER' AS finding, 'warning' AS severity,
       then.o AS committed_offset, then.e AS committed_leader_epoch, then.t AS commit_timestamp,
       offset_at_expansion - then.o AS records_at_risk,
       format_string('%s grew at %s (KIP-253). Group %s first committed on new partition %s-%d (offset %d, at %s) while its committed offset on %s-%d was still %d, below the %d where that partition''s log stood when it grew: keyed records sent before the expansion went to %s-%d, later ones of the same keys may go to %s-%d, so %d records of %s-%d may have been processed after newer records of the same keys. Risk: out-of-order processing per key (a stale value can win). Action: check whether the group''s processing depends on per-key order; if it does, reconcile the keys of %s-%d offsets %d..%d, and next time let consumers drain the old partitions before they read the new ones.',
                     topic, cast(expanded_at AS STRING), group_id, topic, f.p, f.o, cast(f.t AS STRING),
                     topic, partition, then.o, offset_at_expansion, topic, partition, topic, f.p,
                     offset_at_expansion - then.o, topic, partition, topic, partition, then.o, offset_at_expansion - 1)
         AS detail,
       'partition_expansion' AS cause, expanded_at AS cause_time,
       offset_at_expansion, f.p AS expansion_partition
FROM old_at
WHERE then.o < offset_at_expansion
