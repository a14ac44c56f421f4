-- Each topic name's current topic id per the KRaft metadata log (Kafka 2.8+ topic ids, KIP-516): the id of the
-- name's newest TopicRecord, null when that incarnation was removed (RemoveTopicRecord) and not created again.
-- A replica dir whose partition.metadata holds another id is a stale replica of an earlier incarnation (a broker
-- that was down while the topic was deleted and re-created): it is none of the current topic's replicas.
-- Input view: metadata_records. Columns: topic string, current_topic_id string (null: the topic is deleted),
-- topic_ids array<string> (every id the name had in the log read).
WITH named AS (
  SELECT topic_name AS topic, topic_id, seq FROM metadata_records
  WHERE record_type = 'TopicRecord' AND decode_error IS NULL AND topic_name IS NOT NULL AND topic_id IS NOT NULL
),
removed AS (
  SELECT DISTINCT topic_id FROM metadata_records WHERE record_type = 'RemoveTopicRecord' AND decode_error IS NULL
),
newest AS (
  SELECT topic, max_by(topic_id, seq) AS topic_id, collect_set(topic_id) AS topic_ids FROM named GROUP BY topic
)
SELECT n.topic, CASE WHEN r.topic_id IS NULL THEN n.topic_id END AS current_topic_id, n.topic_ids
FROM newest n LEFT JOIN removed r ON n.topic_id = r.topic_id
