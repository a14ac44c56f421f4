-- Views for analysts over an audit's output. `kafka-offset-audit views --output DIR` prints this file bound to
-- the output's committed run (on an object store, the run DIR/summary.json names), ready for spark-sql:
--   kafka-offset-audit views --output DIR > views.sql && cat views.sql my_query.sql > q.sql && spark-sql -f q.sql
-- and `kafka-offset-audit views --output DIR --query "SELECT ..."` runs a query over them.
CREATE OR REPLACE TEMPORARY VIEW koa_findings USING parquet OPTIONS (path '${output}/findings');
CREATE OR REPLACE TEMPORARY VIEW koa_committed_offsets USING parquet OPTIONS (path '${output}/committed_offsets');
CREATE OR REPLACE TEMPORARY VIEW koa_epochs USING parquet OPTIONS (path '${output}/epochs');
CREATE OR REPLACE TEMPORARY VIEW koa_bounds USING parquet OPTIONS (path '${output}/bounds');

-- Latest live commit per group-partition with its verdict, lag and the partition's bounds.
-- lag is log_end_offset - committed_offset and is NOT clamped: negative means the commit is past the log end.
CREATE OR REPLACE TEMPORARY VIEW koa_latest_commits AS
SELECT c.group_id, c.topic, c.partition, c.committed_offset, c.committed_leader_epoch, c.commit_timestamp,
       c.value_version, c.verdict, b.log_start_offset, b.log_end_offset,
       b.log_end_offset - c.committed_offset AS lag, b.leader_id
FROM koa_committed_offsets c
LEFT JOIN koa_bounds b ON c.topic = b.topic AND c.partition = b.partition;

-- Findings counted per group, severity and finding, worst first.
CREATE OR REPLACE TEMPORARY VIEW koa_findings_by_group AS
SELECT group_id, severity, finding, count(*) AS findings, sum(coalesce(records_at_risk, 0)) AS records_at_risk,
       collect_set(concat(topic, '-', cast(partition AS STRING))) AS partitions
FROM koa_findings
GROUP BY group_id, severity, finding
ORDER BY CASE severity WHEN 'critical' THEN 0 WHEN 'error' THEN 1 WHEN 'warning' THEN 2 ELSE 3 END, group_id, finding;

-- Each epoch's range of offsets on the authoritative (leader's) cache: what OffsetsForLeaderEpoch
-- would answer as the end offset of that epoch (the next epoch's start, or the log end offset).
CREATE OR REPLACE TEMPORARY VIEW koa_epoch_end_offsets AS
SELECT e.topic, e.partition, e.broker_id, e.leader_epoch, e.start_offset,
       coalesce(lead(e.start_offset) OVER (PARTITION BY e.topic, e.partition ORDER BY e.leader_epoch), b.log_end_offset) AS end_offset
FROM koa_epochs e
LEFT JOIN koa_bounds b ON e.topic = b.topic AND e.partition = b.partition
WHERE e.is_leader;
