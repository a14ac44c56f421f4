-- KIP-253: every time a topic's partition count grew, from the KRaft metadata log's leader timeline.
-- A topic's partitions are created by PartitionRecords; those written in the same metadata batch as the first
-- ones (same batch timestamp) are the topic's creation, later ones an expansion (CreatePartitions) at that
-- batch's time. Records replayed from a snapshot have no time: they count as created before anything in the
-- log. Topic ids that were removed are left out (a re-created topic has a new id).
-- Input view: leader_timeline.  Columns: topic string, topic_id string, expanded_at timestamp,
-- new_partitions array<int>, old_partitions array<int> (the partitions that existed before expanded_at).
WITH created AS (
  SELECT topic, topic_id, partition, min(coalesce(changed_at, TIMESTAMP '1970-01-01 00:00:00')) AS created_at
  FROM leader_timeline
  WHERE record_type = 'PartitionRecord' AND topic IS NOT NULL AND topic_removed_at IS NULL
  GROUP BY topic, topic_id, partition
),
firsts AS (SELECT topic_id, min(created_at) AS t0 FROM created GROUP BY topic_id),
grown AS (
  SELECT c.topic, c.topic_id, c.created_at AS expanded_at, sort_array(collect_list(c.partition)) AS new_partitions
  FROM created c JOIN firsts f ON c.topic_id = f.topic_id AND c.created_at > f.t0
  GROUP BY c.topic, c.topic_id, c.created_at
)
SELECT g.topic, g.topic_id, g.expanded_at, g.new_partitions,
       sort_array(collect_list(c.partition)) AS old_partitions
FROM grown g JOIN created c ON c.topic_id = g.topic_id AND c.created_at < g.expanded_at
GROUP BY g.topic, g.topic_id, g.expanded_at, g.new_partitions
