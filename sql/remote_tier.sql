-- Tiered storage (KIP-405): the remote tier of each topic-partition, replayed from __remote_log_metadata.
-- Input view: remote_log_metadata (audit.formats.remote_log_metadata.REMOTE_RAW_SCHEMA rows of one replica of each
-- __remote_log_metadata partition). Every event of one remote segment goes to the same metadata partition
-- (RemoteLogMetadataTopicPartitioner hashes its topic id and partition), so its offsets order them: a segment's
-- state is that of its newest RemoteLogSegmentMetadataRecord / RemoteLogSegmentMetadataUpdateRecord.
-- Output: topic_id, topic, partition, remote_log_start_offset (first offset of the first segment whose copy
-- finished and whose deletion has not started: COPY_SEGMENT_FINISHED = 1), remote_log_end_offset (one past the
-- last such offset), remote_segments (how many), one row per topic-partition with at least one remote segment ever
-- (the newest topic id of a name only: a topic deleted and created again keeps its old segments' records).
WITH events AS (
  SELECT segment_id, topic_id, topic, partition, start_offset, end_offset, state, event_timestamp,
         source_partition, offset
  FROM remote_log_metadata
  WHERE kind = 'record' AND decode_error IS NULL AND segment_id IS NOT NULL
    AND record_type IN ('RemoteLogSegmentMetadataRecord', 'RemoteLogSegmentMetadataUpdateRecord')
),
segments AS (
  SELECT segment_id,
         max(topic_id) AS topic_id, max(topic) AS topic, max(partition) AS partition,
         min(start_offset) AS start_offset, max(end_offset) AS end_offset,
         max_by(state, offset) AS state, max(event_timestamp) AS last_event
  FROM events
  GROUP BY segment_id, source_partition
),
newest_id AS (
  SELECT topic, partition, max_by(topic_id, last_event) AS topic_id FROM segments GROUP BY topic, partition
)
SELECT s.topic_id, s.topic, s.partition,
       min(CASE WHEN s.state = 1 THEN s.start_offset END) AS remote_log_start_offset,
       max(CASE WHEN s.state = 1 THEN s.end_offset END) + 1 AS remote_log_end_offset,
       CAST(count(CASE WHEN s.state = 1 THEN 1 END) AS BIGINT) AS remote_segments
FROM segments s JOIN newest_id n ON s.topic = n.topic AND s.partition = n.partition AND s.topic_id = n.topic_id
GROUP BY s.topic_id, s.topic, s.partition
